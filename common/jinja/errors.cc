#include "common/jinja/errors.h"

#include <string>

#include "absl/strings/cord.h"
#include "common/jinja/cat.h"

namespace folio::jinja {
namespace {

constexpr char kRaisedPayload[] = "type.googleapis.com/folio.jinja.RaisedException";
constexpr char kLocatedPayload[] = "type.googleapis.com/folio.jinja.Located";

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

absl::Status TemplateError(std::string_view message) { return absl::InvalidArgumentError(View(message)); }

absl::Status LimitError(std::string_view message) { return absl::ResourceExhaustedError(View(message)); }

absl::Status RaisedError(std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(View(message));
  status.SetPayload(kRaisedPayload, absl::Cord("1"));
  return status;
}

bool IsRaised(const absl::Status& status) { return status.GetPayload(kRaisedPayload).has_value(); }

absl::Status AtLine(absl::Status status, int line) {
  if (status.ok() || IsRaised(status) || status.GetPayload(kLocatedPayload).has_value()) return status;
  absl::Status located(status.code(), Cat("chat template line ", line, ": ", status.message()));
  located.SetPayload(kLocatedPayload, absl::Cord("1"));
  return located;
}

absl::Status Finish(absl::Status status) {
  status.ErasePayload(kLocatedPayload);
  return status;
}

}  // namespace folio::jinja
