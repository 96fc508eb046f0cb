// Builds the canonical JSON of a service's wire API from C++ descriptors and diffs two of them.
#include "tests/proto/canonical_descriptor.h"

#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
#include <map>
#include <set>

namespace tandem::proto_test {
namespace {

namespace pb = google::protobuf;
using nlohmann::json;

std::string type_name_of(const pb::FieldDescriptor& f) {
  if (f.message_type() != nullptr) return f.message_type()->full_name();
  if (f.enum_type() != nullptr) return f.enum_type()->full_name();
  return "";
}

json message_entry(const pb::Descriptor& d) {
  json fields = json::array();
  for (int i = 0; i < d.field_count(); ++i) {
    const pb::FieldDescriptor& f = *d.field(i);
    const pb::OneofDescriptor* oneof = f.real_containing_oneof();
    fields.push_back({
        {"name", f.name()},
        {"json_name", f.json_name()},
        {"number", f.number()},
        {"type", pb::FieldDescriptorProto::Type_Name(
                     static_cast<pb::FieldDescriptorProto::Type>(f.type()))},
        {"label", pb::FieldDescriptorProto::Label_Name(
                      static_cast<pb::FieldDescriptorProto::Label>(f.label()))},
        {"type_name", type_name_of(f)},
        {"oneof", oneof != nullptr ? oneof->name() : std::string()},
        {"proto3_optional", f.has_optional_keyword()},
    });
  }
  std::sort(fields.begin(), fields.end(), [](const json& a, const json& b) {
    return a["number"].get<int>() < b["number"].get<int>();
  });
  json oneofs = json::array();
  for (int i = 0; i < d.real_oneof_decl_count(); ++i) oneofs.push_back(d.oneof_decl(i)->name());
  json ranges = json::array();
  for (int i = 0; i < d.reserved_range_count(); ++i) {
    ranges.push_back({d.reserved_range(i)->start, d.reserved_range(i)->end});
  }
  json names = json::array();
  for (int i = 0; i < d.reserved_name_count(); ++i) names.push_back(d.reserved_name(i));
  return {{"fields", fields},
          {"oneofs", oneofs},
          {"reserved_ranges", ranges},
          {"reserved_names", names},
          {"map_entry", d.options().map_entry()}};
}

json enum_entry(const pb::EnumDescriptor& e) {
  json values = json::array();
  for (int i = 0; i < e.value_count(); ++i) {
    values.push_back({{"name", e.value(i)->name()}, {"number", e.value(i)->number()}});
  }
  std::sort(values.begin(), values.end(), [](const json& a, const json& b) {
    const int na = a["number"].get<int>();
    const int nb = b["number"].get<int>();
    return na != nb ? na < nb : a["name"].get<std::string>() < b["name"].get<std::string>();
  });
  json ranges = json::array();
  for (int i = 0; i < e.reserved_range_count(); ++i) {
    ranges.push_back({e.reserved_range(i)->start, e.reserved_range(i)->end});
  }
  return {{"values", values}, {"reserved_ranges", ranges}};
}

struct Walker {
  std::map<std::string, json> messages;
  std::map<std::string, json> enums;

  void visit(const pb::Descriptor& d) {
    if (messages.count(d.full_name()) != 0) return;
    messages[d.full_name()] = message_entry(d);
    for (int i = 0; i < d.field_count(); ++i) {
      const pb::FieldDescriptor& f = *d.field(i);
      if (f.message_type() != nullptr) visit(*f.message_type());
      if (f.enum_type() != nullptr) visit(*f.enum_type());
    }
  }
  void visit(const pb::EnumDescriptor& e) {
    if (enums.count(e.full_name()) == 0) enums[e.full_name()] = enum_entry(e);
  }
};

std::string compact(const json& j) {
  return j.dump();
}

// Index an array of objects by one key (a number or a name), for pairwise comparison.
std::map<std::string, json> index_by(const json& items, const char* key) {
  std::map<std::string, json> out;
  if (!items.is_array()) return out;
  for (const json& item : items) {
    if (item.is_object() && item.contains(key)) out[item[key].dump()] = item;
  }
  return out;
}

// Compares two arrays of objects keyed by `key`; `what` names the container, `item` the kind.
void diff_items(const std::string& what, const char* item, const char* key, const json& expected,
                const json& actual, std::vector<std::string>& out) {
  const std::map<std::string, json> e = index_by(expected, key);
  const std::map<std::string, json> a = index_by(actual, key);
  for (const auto& [k, ev] : e) {
    const std::string label = what + " " + item + " " + k + " (" + ev.value("name", "") + ")";
    auto it = a.find(k);
    if (it == a.end()) {
      out.push_back(label + ": missing in ours");
      continue;
    }
    for (const auto& [attr, value] : ev.items()) {
      const json& ours = it->second.contains(attr) ? it->second[attr] : json();
      if (ours != value) {
        out.push_back(label + ": " + attr + " reference " + compact(value) + ", ours " +
                      compact(ours));
      }
    }
  }
  for (const auto& [k, av] : a) {
    if (e.count(k) == 0) {
      out.push_back(what + " " + item + " " + k + " (" + av.value("name", "") +
                    "): extra in ours, not in the reference");
    }
  }
}

void diff_section(const char* section, const char* kind, const char* item_list, const char* item,
                  const char* key, const json& expected, const json& actual,
                  std::vector<std::string>& out) {
  const json empty = json::object();
  const json& e = expected.contains(section) ? expected[section] : empty;
  const json& a = actual.contains(section) ? actual[section] : empty;
  for (const auto& [name, ev] : e.items()) {
    const std::string what = std::string(kind) + " " + name;
    if (!a.contains(name)) {
      out.push_back(what + ": missing in ours");
      continue;
    }
    const json& av = a[name];
    diff_items(what, item, key, ev.value(item_list, json::array()),
               av.value(item_list, json::array()), out);
    for (const auto& [attr, value] : ev.items()) {
      if (attr == item_list) continue;
      const json ours = av.contains(attr) ? av[attr] : json();
      if (ours != value) {
        out.push_back(what + ": " + attr + " reference " + compact(value) + ", ours " +
                      compact(ours));
      }
    }
  }
  for (const auto& [name, av] : a.items()) {
    if (!e.contains(name)) {
      out.push_back(std::string(kind) + " " + name + ": extra in ours, not in the reference");
    }
  }
}

}  // namespace

json canonical_service(const pb::ServiceDescriptor& service) {
  Walker walker;
  json methods = json::array();
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& m = *service.method(i);
    walker.visit(*m.input_type());
    walker.visit(*m.output_type());
    methods.push_back({{"name", m.name()},
                       {"input_type", m.input_type()->full_name()},
                       {"output_type", m.output_type()->full_name()},
                       {"client_streaming", m.client_streaming()},
                       {"server_streaming", m.server_streaming()}});
  }
  std::sort(methods.begin(), methods.end(), [](const json& a, const json& b) {
    return a["name"].get<std::string>() < b["name"].get<std::string>();
  });
  const pb::FileDescriptor& file = *service.file();
  for (int i = 0; i < file.message_type_count(); ++i) walker.visit(*file.message_type(i));
  for (int i = 0; i < file.enum_type_count(); ++i) walker.visit(*file.enum_type(i));

  json messages = json::object();
  for (const auto& [name, entry] : walker.messages) messages[name] = entry;
  json enums = json::object();
  for (const auto& [name, entry] : walker.enums) enums[name] = entry;
  json services = json::object();
  services[service.full_name()] = {{"methods", methods}};
  return {{"services", services}, {"messages", messages}, {"enums", enums}};
}

std::vector<std::string> canonical_differences(const json& expected, const json& actual) {
  std::vector<std::string> out;
  diff_section("services", "service", "methods", "method", "name", expected, actual, out);
  diff_section("messages", "message", "fields", "field", "number", expected, actual, out);
  diff_section("enums", "enum", "values", "value", "number", expected, actual, out);
  return out;
}

}  // namespace tandem::proto_test
