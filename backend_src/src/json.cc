// JsonValue over RapidJSON (the library Triton's own backends read their
// configuration with, through triton::common::TritonJson): RapidJSON's SAX
// reader tokenizes, validates UTF-8 and decodes escapes; this file only builds
// the tree. Its writer serializes it back.
#include "json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cerrno>
#include <cstdlib>

namespace npu_ge {

// Builds JsonValues from RapidJSON's SAX events. Numbers arrive as their
// literal text (kParseNumbersAsStringsFlag), so int64 values are exact.
class JsonParser : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, JsonParser> {
 public:
  static constexpr size_t kMaxDepth = 64;

  explicit JsonParser(JsonValue* root) : root_(root) {}
  bool too_deep() const { return too_deep_; }

  bool Null() { return Put(JsonValue()); }
  bool Bool(bool b)
  {
    JsonValue v;
    v.kind_ = JsonValue::Kind::kBool;
    v.bool_ = b;
    return Put(std::move(v));
  }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool)
  {
    JsonValue v;
    v.kind_ = JsonValue::Kind::kNumber;
    v.string_.assign(text, length);
    v.number_ = std::strtod(v.string_.c_str(), nullptr);  // grammar checked by RapidJSON
    return Put(std::move(v));
  }
  bool String(const char* text, rapidjson::SizeType length, bool)
  {
    return Put(JsonValue::String(std::string(text, length)));
  }
  bool StartObject() { return Open(JsonValue::Object()); }
  bool Key(const char* text, rapidjson::SizeType length, bool)
  {
    key_.assign(text, length);
    return true;
  }
  bool EndObject(rapidjson::SizeType) { return Close(); }
  bool StartArray() { return Open(JsonValue::Array()); }
  bool EndArray(rapidjson::SizeType) { return Close(); }

 private:
  // Places a finished value: the root, an array item or the member of key_.
  JsonValue* Place(JsonValue v)
  {
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    JsonValue* parent = stack_.back();
    if (parent->IsArray()) {
      parent->items_.push_back(std::move(v));
      return &parent->items_.back();
    }
    JsonValue& slot = parent->members_[key_];  // a repeated key: the last one wins
    slot = std::move(v);
    return &slot;
  }
  bool Put(JsonValue v)
  {
    Place(std::move(v));
    return true;
  }
  bool Open(JsonValue v)
  {
    if (stack_.size() >= kMaxDepth) {  // JsonValue's destructor recurses too
      too_deep_ = true;
      return false;
    }
    stack_.push_back(Place(std::move(v)));
    return true;
  }
  bool Close()
  {
    stack_.pop_back();
    return true;
  }

  JsonValue* root_;
  std::vector<JsonValue*> stack_;  // open containers; items_ of an open array
                                   // only grow at its end, after its last child closed
  std::string key_;
  bool too_deep_ = false;
};

bool
JsonValue::Parse(const std::string& text, JsonValue* out, std::string* error)
{
  *out = JsonValue();
  JsonParser handler(out);
  rapidjson::Reader reader;
  rapidjson::StringStream in(text.c_str());
  constexpr unsigned kFlags = rapidjson::kParseIterativeFlag |
                              rapidjson::kParseValidateEncodingFlag |
                              rapidjson::kParseNumbersAsStringsFlag;
  const rapidjson::ParseResult result = reader.Parse<kFlags>(in, handler);
  if (!result && result.Code() != rapidjson::kParseErrorDocumentRootNotSingular) {
    *error = (handler.too_deep() ? std::string("JSON nested too deeply")
                                 : rapidjson::GetParseError_En(result.Code())) +
             std::string(" at offset ") + std::to_string(result.Offset());
    *out = JsonValue();
    return false;
  }
  if (!result || in.Tell() != text.size()) {  // text after the value, or a NUL in it
    *error = "trailing characters after the JSON value at offset " +
             std::to_string(result ? in.Tell() : result.Offset());
    *out = JsonValue();
    return false;
  }
  return true;
}

bool
JsonValue::AsInt64(int64_t* out) const
{
  if (kind_ != Kind::kNumber && kind_ != Kind::kString) return false;
  const std::string& text = string_;
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

const JsonValue&
JsonValue::operator[](const std::string& key) const
{
  static const JsonValue kNull;
  if (kind_ != Kind::kObject) return kNull;
  auto it = members_.find(key);
  return it == members_.end() ? kNull : it->second;
}

bool
JsonValue::Has(const std::string& key) const
{
  return kind_ == Kind::kObject && members_.count(key) > 0;
}

JsonValue
JsonValue::String(const std::string& text)
{
  JsonValue v;
  v.kind_ = Kind::kString;
  v.string_ = text;
  return v;
}

JsonValue
JsonValue::Number(int64_t value)
{
  JsonValue v;
  v.kind_ = Kind::kNumber;
  v.number_ = static_cast<double>(value);
  v.string_ = std::to_string(value);
  return v;
}

JsonValue
JsonValue::Array()
{
  JsonValue v;
  v.kind_ = Kind::kArray;
  return v;
}

JsonValue
JsonValue::Object()
{
  JsonValue v;
  v.kind_ = Kind::kObject;
  return v;
}

void
JsonValue::Append(JsonValue item)
{
  if (kind_ == Kind::kArray) items_.push_back(std::move(item));
}

void
JsonValue::Set(const std::string& key, JsonValue value)
{
  if (kind_ == Kind::kObject) members_[key] = std::move(value);
}

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void
Write(const JsonValue& v, JsonWriter* w)
{
  switch (v.kind()) {
    case JsonValue::Kind::kNull:
      w->Null();
      break;
    case JsonValue::Kind::kBool:
      w->Bool(v.AsBool());
      break;
    case JsonValue::Kind::kNumber:  // the literal it was parsed from
      w->RawValue(v.AsString().data(), v.AsString().size(), rapidjson::kNumberType);
      break;
    case JsonValue::Kind::kString:
      w->String(
          v.AsString().data(), static_cast<rapidjson::SizeType>(v.AsString().size()));
      break;
    case JsonValue::Kind::kArray:
      w->StartArray();
      for (const JsonValue& item : v.Items()) Write(item, w);
      w->EndArray();
      break;
    case JsonValue::Kind::kObject:
      w->StartObject();
      for (const auto& kv : v.Members()) {
        w->Key(kv.first.data(), static_cast<rapidjson::SizeType>(kv.first.size()));
        Write(kv.second, w);
      }
      w->EndObject();
      break;
  }
}

}  // namespace

std::string
JsonValue::Serialize() const
{
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  Write(*this, &writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace npu_ge
