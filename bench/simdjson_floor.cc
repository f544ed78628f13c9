// simdjson_floor: the floor the reader is measured against — a bare simdjson
// on-demand pass over the whole file (loaded into a padded buffer, one
// thread) that sums "dur" by "name", the least any trace tool must do.
//
//   simdjson_floor TRACE.json
#include <simdjson.h>

#include <cstdio>
#include <string>
#include <unordered_map>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: simdjson_floor TRACE.json\n");
    return 2;
  }
  simdjson::padded_string json;
  if (simdjson::padded_string::load(argv[1]).get(json)) {
    std::fprintf(stderr, "simdjson_floor: cannot read %s\n", argv[1]);
    return 2;
  }
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (parser.iterate(json).get(doc)) return 2;
  std::unordered_map<std::string, double> by_name;
  std::size_t events = 0;
  simdjson::ondemand::array arr;
  if (doc["traceEvents"].get_array().get(arr)) return 2;
  for (auto item : arr) {
    simdjson::ondemand::object ev;
    if (item.get_object().get(ev)) return 2;
    std::string_view name;
    double dur = 0;
    ++events;
    if (ev["name"].get_string().get(name)) continue;
    if (ev["dur"].get_double().get(dur)) continue;
    by_name[std::string(name)] += dur;
  }
  double total = 0;
  for (const auto& [k, v] : by_name) total += v;
  std::printf("%zu events, %zu names, %.3f us\n", events, by_name.size(), total);
  return 0;
}
