// Canonical JSON description of a gRPC service's wire API (the same shape that
// scripts/fixtures/make_proto_fixtures.py writes from the Python descriptors) and its diff.
#pragma once

#include <google/protobuf/descriptor.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tandem::proto_test {

// Describes `service`, every message and enum reachable from its methods through fields, and
// every top-level message and enum of its file: {"services", "messages", "enums"} keyed by full
// name. Fields are sorted by number; real oneofs only (proto3 `optional` is a flag). The
// descriptor must outlive the call; the result owns nothing of it. Any thread.
nlohmann::json canonical_service(const google::protobuf::ServiceDescriptor& service);

// Every difference between `expected` and `actual` (both from canonical_service's shape), one
// readable line each, naming the message/enum/service, the field number and name, and the
// attribute. Keys other than services/messages/enums (e.g. "generator") are ignored. Empty when
// the two describe the same wire API.
std::vector<std::string> canonical_differences(const nlohmann::json& expected,
                                               const nlohmann::json& actual);

}  // namespace tandem::proto_test
