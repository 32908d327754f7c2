// A small JSON document model: enough to read the model and backend
// configuration JSON that Triton hands to the backend, and to write a
// completed model configuration back (auto-complete). Parsed and written by
// RapidJSON (json.cc); parse errors carry RapidJSON's message and the byte
// offset. No Triton dependency, so it is unit-tested alone.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace npu_ge {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  // Parses 'text'; on failure returns false and sets 'error'.
  static bool Parse(const std::string& text, JsonValue* out, std::string* error);

  Kind kind() const { return kind_; }
  bool IsNull() const { return kind_ == Kind::kNull; }
  bool IsObject() const { return kind_ == Kind::kObject; }
  bool IsArray() const { return kind_ == Kind::kArray; }
  bool IsString() const { return kind_ == Kind::kString; }
  bool IsNumber() const { return kind_ == Kind::kNumber; }
  bool IsBool() const { return kind_ == Kind::kBool; }

  bool AsBool() const { return bool_; }
  double AsDouble() const { return number_; }
  // Integers in Triton's JSON (int64 fields) may arrive as strings: "8".
  bool AsInt64(int64_t* out) const;
  const std::string& AsString() const { return string_; }

  // Object access; returns a shared null value when absent or not an object.
  const JsonValue& operator[](const std::string& key) const;
  bool Has(const std::string& key) const;
  const std::map<std::string, JsonValue>& Members() const { return members_; }

  // Array access.
  size_t Size() const { return items_.size(); }
  const JsonValue& At(size_t i) const { return items_[i]; }
  const std::vector<JsonValue>& Items() const { return items_; }

  // Builders, for writing a completed configuration back to Triton.
  static JsonValue String(const std::string& text);
  static JsonValue Number(int64_t value);
  static JsonValue Array();
  static JsonValue Object();
  void Append(JsonValue item);                        // arrays only
  void Set(const std::string& key, JsonValue value);  // objects only
  // Compact JSON text; numbers keep the literal text they were parsed from.
  std::string Serialize() const;

 private:
  friend class JsonParser;  // json.cc: builds values from RapidJSON's events
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;  // strings, and the literal text of numbers
  std::vector<JsonValue> items_;
  std::map<std::string, JsonValue> members_;
};

}  // namespace npu_ge
