// The object library that builds tests/pch/test_pch.h's precompiled header.
