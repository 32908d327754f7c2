#include "json.h"

#include <cerrno>
#include <cstdlib>

namespace npu_ge {

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  bool ParseDocument(JsonValue* out, std::string* error)
  {
    bool ok = ParseValue(out, 0);
    if (ok) {
      SkipSpace();
      if (pos_ != s_.size()) {
        ok = Fail("trailing characters after the JSON value");
      }
    }
    if (!ok) {
      *error = error_ + " at offset " + std::to_string(pos_);
    }
    return ok;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool Fail(const std::string& msg)
  {
    if (error_.empty()) error_ = msg;
    return false;
  }
  void SkipSpace()
  {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' ||
                                s_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Consume(const char* literal)
  {
    size_t n = std::char_traits<char>::length(literal);
    if (s_.compare(pos_, n, literal) != 0) return false;
    pos_ += n;
    return true;
  }

  bool ParseValue(JsonValue* v, int depth)
  {
    if (depth > kMaxDepth) return Fail("JSON nested too deeply");
    SkipSpace();
    if (pos_ >= s_.size()) return Fail("unexpected end of JSON");
    char c = s_[pos_];
    if (c == '{') return ParseObject(v, depth);
    if (c == '[') return ParseArray(v, depth);
    if (c == '"') {
      v->kind_ = JsonValue::Kind::kString;
      return ParseString(&v->string_);
    }
    if (Consume("true")) {
      v->kind_ = JsonValue::Kind::kBool;
      v->bool_ = true;
      return true;
    }
    if (Consume("false")) {
      v->kind_ = JsonValue::Kind::kBool;
      return true;
    }
    if (Consume("null")) return true;
    return ParseNumber(v);
  }

  bool ParseNumber(JsonValue* v)
  {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size() &&
           (isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
            s_[pos_] == 'e' || s_[pos_] == 'E' || s_[pos_] == '+' || s_[pos_] == '-')) {
      ++pos_;
    }
    std::string text = s_.substr(start, pos_ - start);
    char* end = nullptr;
    errno = 0;
    double d = text.empty() ? 0 : strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno != 0) {
      pos_ = start;
      return Fail("invalid JSON value");
    }
    v->kind_ = JsonValue::Kind::kNumber;
    v->number_ = d;
    v->string_ = text;
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string* out)
  {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool ParseString(std::string* out)
  {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return Fail("truncated \\u escape");
          char* end = nullptr;
          std::string hex = s_.substr(pos_, 4);
          uint32_t cp = static_cast<uint32_t>(strtoul(hex.c_str(), &end, 16));
          if (end != hex.c_str() + 4) return Fail("invalid \\u escape");
          pos_ += 4;
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Fail("invalid escape in JSON string");
      }
    }
    return Fail("unterminated JSON string");
  }

  bool ParseArray(JsonValue* v, int depth)
  {
    v->kind_ = JsonValue::Kind::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      v->items_.emplace_back();
      if (!ParseValue(&v->items_.back(), depth + 1)) return false;
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']' in JSON array");
    }
  }

  bool ParseObject(JsonValue* v, int depth)
  {
    v->kind_ = JsonValue::Kind::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        return Fail("expected a string key in JSON object");
      }
      std::string key;
      if (!ParseString(&key)) return false;
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') {
        return Fail("expected ':' in JSON object");
      }
      ++pos_;
      JsonValue member;
      if (!ParseValue(&member, depth + 1)) return false;
      v->members_[key] = std::move(member);
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}' in JSON object");
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

bool
JsonValue::Parse(const std::string& text, JsonValue* out, std::string* error)
{
  *out = JsonValue();
  JsonParser parser(text);
  return parser.ParseDocument(out, error);
}

bool
JsonValue::AsInt64(int64_t* out) const
{
  const std::string* text = nullptr;
  if (kind_ == Kind::kNumber || kind_ == Kind::kString) {
    text = &string_;
  } else {
    return false;
  }
  if (text->empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(text->c_str(), &end, 10);
  if (errno != 0 || end != text->c_str() + text->size()) return false;
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

void
AppendQuoted(const std::string& text, std::string* out)
{
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      *out += "\\u00";
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xf]);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

}  // namespace

void
JsonValue::SerializeTo(std::string* out) const
{
  switch (kind_) {
    case Kind::kNull:
      *out += "null";
      break;
    case Kind::kBool:
      *out += bool_ ? "true" : "false";
      break;
    case Kind::kNumber:
      *out += string_;
      break;
    case Kind::kString:
      AppendQuoted(string_, out);
      break;
    case Kind::kArray: {
      out->push_back('[');
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out->push_back(',');
        items_[i].SerializeTo(out);
      }
      out->push_back(']');
      break;
    }
    case Kind::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& kv : members_) {
        if (!first) out->push_back(',');
        first = false;
        AppendQuoted(kv.first, out);
        out->push_back(':');
        kv.second.SerializeTo(out);
      }
      out->push_back('}');
      break;
    }
  }
}

std::string
JsonValue::Serialize() const
{
  std::string out;
  SerializeTo(&out);
  return out;
}

}  // namespace npu_ge
