// TEST DOUBLE: parser and element arithmetic for the double's model files.
#include "model_file.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace acl_double {
namespace {

std::vector<std::string>
Split(const std::string& s, char sep)
{
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

uint16_t
FloatToHalf(float f)
{
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (exp << 10) | (mant >> 13));
}

float
HalfToFloat(uint16_t h)
{
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t x;
  if (exp == 0) {
    x = sign;  // zero (subnormals flushed)
  } else if (exp == 31) {
    x = sign | 0x7f800000 | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace

size_t
DtypeSize(aclDataType dtype)
{
  switch (dtype) {
    case ACL_BOOL:
    case ACL_INT8:
    case ACL_UINT8:
      return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
      return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
      return 4;
    case ACL_DOUBLE:
    case ACL_INT64:
    case ACL_UINT64:
      return 8;
    default:
      return 0;
  }
}

bool
DtypeFromName(const std::string& n, aclDataType* d)
{
  static const std::pair<const char*, aclDataType> kNames[] = {
      {"BOOL", ACL_BOOL},     {"INT8", ACL_INT8},    {"UINT8", ACL_UINT8},
      {"FP16", ACL_FLOAT16},  {"BF16", ACL_BF16},    {"INT16", ACL_INT16},
      {"UINT16", ACL_UINT16}, {"FP32", ACL_FLOAT},   {"INT32", ACL_INT32},
      {"UINT32", ACL_UINT32}, {"FP64", ACL_DOUBLE},  {"INT64", ACL_INT64},
      {"UINT64", ACL_UINT64}, {"STRING", ACL_STRING}};
  for (const auto& kv : kNames) {
    if (n == kv.first) {
      *d = kv.second;
      return true;
    }
  }
  return false;
}

double
ReadElement(const void* base, aclDataType dtype, size_t i)
{
  const uint8_t* p = static_cast<const uint8_t*>(base) + i * DtypeSize(dtype);
  auto get = [p](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  };
  switch (dtype) {
    case ACL_BOOL:
      return get(uint8_t{}) != 0 ? 1 : 0;
    case ACL_INT8:
      return get(int8_t{});
    case ACL_UINT8:
      return get(uint8_t{});
    case ACL_INT16:
      return get(int16_t{});
    case ACL_UINT16:
      return get(uint16_t{});
    case ACL_INT32:
      return get(int32_t{});
    case ACL_UINT32:
      return get(uint32_t{});
    case ACL_INT64:
      return get(int64_t{});
    case ACL_UINT64:
      return get(uint64_t{});
    case ACL_FLOAT:
      return get(float{});
    case ACL_DOUBLE:
      return get(double{});
    case ACL_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case ACL_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      uint32_t x = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &x, 4);
      return f;
    }
    default:
      return 0;
  }
}

void
WriteElement(void* base, aclDataType dtype, size_t i, double v)
{
  uint8_t* p = static_cast<uint8_t*>(base) + i * DtypeSize(dtype);
  auto put = [p](auto value) { std::memcpy(p, &value, sizeof(value)); };
  switch (dtype) {
    case ACL_BOOL:
      put(static_cast<uint8_t>(v != 0));
      break;
    case ACL_INT8:
      put(static_cast<int8_t>(v));
      break;
    case ACL_UINT8:
      put(static_cast<uint8_t>(v));
      break;
    case ACL_INT16:
      put(static_cast<int16_t>(v));
      break;
    case ACL_UINT16:
      put(static_cast<uint16_t>(v));
      break;
    case ACL_INT32:
      put(static_cast<int32_t>(v));
      break;
    case ACL_UINT32:
      put(static_cast<uint32_t>(v));
      break;
    case ACL_INT64:
      put(static_cast<int64_t>(v));
      break;
    case ACL_UINT64:
      put(static_cast<uint64_t>(v));
      break;
    case ACL_FLOAT:
      put(static_cast<float>(v));
      break;
    case ACL_DOUBLE:
      put(v);
      break;
    case ACL_FLOAT16:
      put(FloatToHalf(static_cast<float>(v)));
      break;
    case ACL_BF16: {
      float f = static_cast<float>(v);
      uint32_t x;
      std::memcpy(&x, &f, 4);
      put(static_cast<uint16_t>(x >> 16));
      break;
    }
    default:
      break;
  }
}

uint64_t
ModelSpec::MaxRows() const
{
  uint64_t m = 0;
  for (uint64_t g : gears) m = g > m ? g : m;
  return m;
}

std::vector<size_t>
ModelSpec::DimsGearInputs() const
{
  if (!dims_order.empty()) return dims_order;
  std::vector<size_t> all;
  for (size_t i = 0; i < inputs.size(); ++i) all.push_back(i);
  return all;
}

std::vector<int64_t>
ModelSpec::DimsGearList(size_t g) const
{
  std::vector<int64_t> list;
  for (size_t i : DimsGearInputs()) {
    for (int64_t d : DimsInGear(i, g)) list.push_back(d);
  }
  return list;
}

std::vector<int64_t>
ModelSpec::DimsInGear(size_t input, size_t g) const
{
  std::vector<int64_t> values;  // the gear's values for every -1 dim, all inputs
  if (!dims_gears.empty()) values = dims_gears[g];
  if (!hw_gears.empty()) {
    values = {
        static_cast<int64_t>(hw_gears[g].first),
        static_cast<int64_t>(hw_gears[g].second)};
  }
  size_t next = 0;  // -1 dims of the inputs listed before `input` take the first values
  const std::vector<size_t> order =
      hw_gears.empty() ? DimsGearInputs() : std::vector<size_t>();
  for (size_t k = 0; k < input && order.empty(); ++k) {
    for (int64_t d : inputs[k].dims) next += d < 0 ? 1 : 0;
  }
  for (size_t k = 0; k < order.size() && order[k] != input; ++k) {
    for (int64_t d : inputs[order[k]].dims) next += d < 0 ? 1 : 0;
  }
  std::vector<int64_t> dims = inputs[input].dims;
  for (int64_t& d : dims) {
    if (d < 0 && next < values.size()) d = values[next++];
  }
  return dims;
}

size_t
ModelSpec::BytesInGear(const TensorSpec& t, size_t input, size_t g) const
{
  size_t n = 1;
  for (int64_t d : DimsInGear(input, g)) n *= static_cast<size_t>(d);
  return n * DtypeSize(t.dtype);
}

size_t
ModelSpec::ElementsPerRow(const TensorSpec& t) const
{
  size_t n = 1;
  for (size_t d = (t.dims.size() > 0 && t.dims[0] < 0) ? 1 : 0; d < t.dims.size(); ++d) {
    n *= static_cast<size_t>(t.dims[d]);
  }
  return n;
}

size_t
ModelSpec::TensorBytes(const TensorSpec& t, uint64_t rows) const
{
  size_t n = ElementsPerRow(t);
  if (!t.dims.empty() && t.dims[0] < 0) n *= rows;
  return n * DtypeSize(t.dtype);
}

namespace {

bool
ParseDims(const std::string& text, std::vector<int64_t>* dims)
{
  if (text == "scalar") return true;
  for (const std::string& d : Split(text, ',')) {
    try {
      dims->push_back(std::stoll(d));
    }
    catch (...) {
      return false;
    }
  }
  return true;
}

bool
ParseLine(const std::vector<std::string>& w, ModelSpec* spec, std::string* error)
{
  const std::string& key = w[0];
  if ((key == "input" || key == "output") && w.size() >= 4) {
    OutputSpec t;
    t.name = w[1];
    if (!DtypeFromName(w[2], &t.dtype) || !ParseDims(w[3], &t.dims)) {
      *error = "bad tensor line for " + w[1];
      return false;
    }
    if (key == "input") {
      spec->inputs.push_back(t);
      return true;
    }
    for (size_t i = 4; i + 1 < w.size(); i += 2) {
      if (w[i] == "scale") t.scale = std::stod(w[i + 1]);
      if (w[i] == "offset") t.offset = std::stod(w[i + 1]);
      if (w[i] == "from") {
        for (const std::string& n : Split(w[i + 1], ',')) {
          size_t k = 0;
          while (k < spec->inputs.size() && spec->inputs[k].name != n) ++k;
          if (k == spec->inputs.size()) {
            *error = "output " + t.name + " reads unknown input " + n;
            return false;
          }
          t.from.push_back(k);
        }
      }
    }
    if (t.from.empty()) t.from.push_back(0);
    spec->outputs.push_back(t);
    return true;
  }
  if (key == "gears" && w.size() == 2) {
    for (const std::string& g : Split(w[1], ',')) spec->gears.push_back(std::stoull(g));
    return true;
  }
  if (key == "dynamic_dims" && w.size() == 2) {
    for (const std::string& gear : Split(w[1], ';')) {
      std::vector<int64_t> values;
      if (!ParseDims(gear, &values)) {
        *error = "bad dynamic_dims gear '" + gear + "'";
        return false;
      }
      spec->dims_gears.push_back(values);
    }
    return true;
  }
  if (key == "dynamic_dims_order" && w.size() == 2) {
    for (const std::string& name : Split(w[1], ',')) {
      size_t i = 0;
      while (i < spec->inputs.size() && spec->inputs[i].name != name) ++i;
      if (i == spec->inputs.size()) {
        *error = "dynamic_dims_order names '" + name + "', not an input declared above";
        return false;
      }
      spec->dims_order.push_back(i);
    }
    return true;
  }
  if (key == "dynamic_image_size" && w.size() == 2) {
    for (const std::string& gear : Split(w[1], ';')) {
      std::vector<std::string> hw = Split(gear, ',');
      if (hw.size() != 2) {
        *error = "bad dynamic_image_size gear '" + gear + "' (expected H,W)";
        return false;
      }
      spec->hw_gears.emplace_back(std::stoull(hw[0]), std::stoull(hw[1]));
    }
    return true;
  }
  if (key == "delay_us" && w.size() == 2) {
    spec->delay_us = std::stoll(w[1]);
    return true;
  }
  if (key == "delay_per_row_us" && w.size() == 2) {
    spec->delay_per_row_us = std::stod(w[1]);
    return true;
  }
  if (key == "fail_execute_on_value" && w.size() == 2) {
    spec->has_fail_value = true;
    spec->fail_value = std::stod(w[1]);
    return true;
  }
  if (key == "hang_on_value" && w.size() == 2) {
    spec->has_hang_value = true;
    spec->hang_value = std::stod(w[1]);
    return true;
  }
  if (key == "overflow_on_value" && (w.size() == 2 || w.size() == 3)) {
    spec->has_overflow_value = true;
    spec->overflow_value = std::stod(w[1]);
    if (w.size() == 3) spec->overflow_code = static_cast<aclError>(std::stoi(w[2]));
    return true;
  }
  if (key == "outputs_at_largest_gear" && w.size() == 1) {
    spec->outputs_at_largest_gear = true;
    return true;
  }
  if (key == "aipp_image_dims" && w.size() == 3) {
    for (TensorSpec& t : spec->inputs) {
      if (t.name == w[1]) return ParseDims(w[2], &t.image_dims);
    }
    *error = "aipp_image_dims names '" + w[1] + "', not an input declared above";
    return false;
  }
  if (key == "fail_load" && w.size() == 1) {
    spec->fail_load = true;
    return true;
  }
  if (key == "weight_bytes" && w.size() == 2) {
    spec->weight_bytes = std::stoull(w[1]);
    return true;
  }
  *error = "unknown directive '" + key + "'";
  return false;
}

}  // namespace

bool
LoadModelSpec(const std::string& path, ModelSpec* spec, std::string* error)
{
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  std::string line;
  if (!std::getline(in, line) || line.rfind("npu_ge_acl_double_model v1", 0) != 0) {
    *error = path + " is not an ACL double model file";
    return false;
  }
  ModelSpec s;
  while (std::getline(in, line)) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::stringstream ss(line);
    std::vector<std::string> words;
    std::string word;
    while (ss >> word) words.push_back(word);
    if (words.empty()) continue;
    try {
      if (!ParseLine(words, &s, error)) return false;
    }
    catch (...) {
      *error = "bad number in line '" + line + "'";
      return false;
    }
  }
  for (const OutputSpec& o : s.outputs) {
    for (size_t k : o.from) {
      if (s.ElementsPerRow(s.inputs[k]) != s.ElementsPerRow(o)) {
        *error = "output " + o.name + " and input " + s.inputs[k].name +
                 " differ in elements per row";
        return false;
      }
    }
  }
  *spec = s;
  return true;
}

}  // namespace acl_double
