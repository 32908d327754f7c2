#include "test_util.h"

using npu_ge::JsonValue;

TEST(Json, ParsesNestedObjectsArraysAndScalars)
{
  JsonValue v = npu_ge_test::Json(
      R"({"a": [1, -2.5, "x"], "b": {"c": true, "d": null}, "e": false})");
  ASSERT_TRUE(v.IsObject());
  ASSERT_EQ(v["a"].Size(), 3u);
  EXPECT_DOUBLE_EQ(v["a"].At(1).AsDouble(), -2.5);
  EXPECT_EQ(v["a"].At(2).AsString(), "x");
  EXPECT_TRUE(v["b"]["c"].AsBool());
  EXPECT_TRUE(v["b"]["d"].IsNull());
  EXPECT_FALSE(v["e"].AsBool());
  EXPECT_TRUE(v["missing"]["deeper"].IsNull());
}

TEST(Json, ReadsInt64FromNumbersAndDigitStrings)
{
  JsonValue v = npu_ge_test::Json(R"({"n": 9007199254740993, "s": "-42", "f": 1.5})");
  int64_t n = 0;
  ASSERT_TRUE(v["n"].AsInt64(&n));
  EXPECT_EQ(n, 9007199254740993LL);  // exact, not through a double
  ASSERT_TRUE(v["s"].AsInt64(&n));
  EXPECT_EQ(n, -42);
  EXPECT_FALSE(v["f"].AsInt64(&n));
}

TEST(Json, DecodesStringEscapes)
{
  JsonValue v = npu_ge_test::Json(R"(["a\"b\\c\n", "\u00e9"])");
  EXPECT_EQ(v.At(0).AsString(), "a\"b\\c\n");
  EXPECT_EQ(v.At(1).AsString(), "\xc3\xa9");
}

TEST(Json, ReportsErrorsWithOffset)
{
  JsonValue v;
  std::string error;
  EXPECT_FALSE(JsonValue::Parse(R"({"a": 1,})", &v, &error));
  EXPECT_NE(error.find("offset 8"), std::string::npos) << error;
  EXPECT_FALSE(JsonValue::Parse(R"({"a": 1} x)", &v, &error));
  EXPECT_NE(error.find("trailing"), std::string::npos) << error;
  EXPECT_FALSE(JsonValue::Parse(R"("open)", &v, &error));
  EXPECT_FALSE(JsonValue::Parse(std::string(100, '['), &v, &error));
  EXPECT_NE(error.find("deeply"), std::string::npos) << error;
}

TEST(Json, SerializesWhatItParsedKeepingNumberLiterals)
{
  const std::string text =
      R"({"a":[1,-2.5,"x\"y\\z\n"],"b":{"c":true,"d":null},"n":9007199254740993})";
  JsonValue v = npu_ge_test::Json(text);
  EXPECT_EQ(v["a"].At(2).AsString(), "x\"y\\z\n");
  EXPECT_EQ(v.Serialize(), text);  // keys were already sorted
  EXPECT_EQ(npu_ge_test::Json(v.Serialize()).Serialize(), text);
  EXPECT_EQ(
      npu_ge_test::Json(R"({"b": 1, "a": "\n"})").Serialize(), R"({"a":"\n","b":1})");
}

TEST(Json, BuildersMakeObjectsAndArrays)
{
  JsonValue obj = JsonValue::Object();
  JsonValue dims = JsonValue::Array();
  dims.Append(JsonValue::Number(-1));
  dims.Append(JsonValue::Number(4));
  obj.Set("name", JsonValue::String("in\x01put"));
  obj.Set("dims", std::move(dims));
  EXPECT_EQ(obj.Serialize(), R"({"dims":[-1,4],"name":"in\u0001put"})");
  JsonValue scalar = JsonValue::Number(3);
  scalar.Set("ignored", JsonValue::Number(1));  // not an object: no effect
  scalar.Append(JsonValue::Number(1));          // not an array: no effect
  EXPECT_EQ(scalar.Serialize(), "3");
}

// RapidJSON (json.cc) decodes and validates what the hand-written parser it
// replaced got wrong: each case below passed or decoded wrongly before.
TEST(Json, DecodesSurrogatePairsToOneCodePoint)
{
  JsonValue v = npu_ge_test::Json(R"(["\ud83d\ude00"])");
  EXPECT_EQ(v.At(0).AsString(), "\xf0\x9f\x98\x80");  // U+1F600, 4 bytes of UTF-8
}

TEST(Json, RefusesWhatJsonDoesNotAllow)
{
  JsonValue v;
  std::string error;
  for (const std::string& bad :
       {std::string(R"([012])"),        // leading zero
        std::string("[\"a\x01b\"]"),    // raw control character in a string
        std::string("[\"\xff\xfe\"]"),  // not UTF-8
        std::string(R"(["\ud83d"])"),   // lone surrogate
        std::string("[1]\0[2]", 7),     // a NUL, then more
        std::string(R"([1.])")}) {
    EXPECT_FALSE(JsonValue::Parse(bad, &v, &error)) << bad;
    EXPECT_NE(error.find("offset"), std::string::npos) << error;
    EXPECT_TRUE(v.IsNull()) << bad;  // nothing half-built is handed out
  }
}
