// JSON values as text for replies and error messages. Strings with invalid
// UTF-8 (a client's or a checkpoint's bytes) are written with U+FFFD instead
// of making dump() throw.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace folio {

// The whole value, compact; for nlohmann::json and ordered_json alike.
template <class Json>
std::string JsonText(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The value for an error message, cut to 60 characters.
template <class Json>
std::string JsonSnippet(const Json& value) {
  std::string text = JsonText(value);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

}  // namespace folio
