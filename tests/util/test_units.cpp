#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "embshard/util/error.h"
#include "embshard/util/units.h"

namespace embshard {
namespace {

TEST(Units, ParsesBytesAndUnits) {
  EXPECT_EQ(parse_bytes("1000", "--mem"), 1000);
  EXPECT_EQ(parse_bytes("40GB", "--mem"), int64_t{40} * 1000 * 1000 * 1000);
  EXPECT_EQ(parse_bytes("40 gb", "--mem"), int64_t{40} * 1000 * 1000 * 1000);
  EXPECT_EQ(parse_bytes("512MiB", "--mem"), int64_t{512} << 20);
  EXPECT_EQ(parse_bytes("1.5GiB", "--mem"), int64_t{3} << 29);
  EXPECT_EQ(parse_bytes("2TB", "--mem"), int64_t{2} * 1000 * 1000 * 1000 * 1000);
  EXPECT_EQ(parse_bytes("7KiB", "--mem"), 7 * 1024);
  EXPECT_EQ(parse_bytes("3B", "--mem"), 3);
  EXPECT_EQ(parse_bytes("0", "--mem"), 0);
}

TEST(Units, RejectsWhatIsNotASizeNamingTheOption) {
  for (const std::string bad : {"", "GB", "12XB", "-5GB", "1e30", "nan", "40 G B x", "inf"}) {
    try {
      parse_bytes(bad, "--mem-per-device");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--mem-per-device"), std::string::npos) << e.what();
    }
  }
}

TEST(Units, FormatsDecimalUnitsThatParseBack) {
  EXPECT_EQ(format_bytes(900), "900 B");
  EXPECT_EQ(format_bytes(1500), "1.50 KB");
  EXPECT_EQ(format_bytes(512e6), "512 MB");
  EXPECT_EQ(format_bytes(2.325e9), "2.33 GB");
  EXPECT_EQ(format_bytes(40e9), "40.0 GB");
  EXPECT_EQ(format_bytes(999.6e6), "1.00 GB");  // rounds up into the next unit
  for (double b : {1.0, 999.0, 12345.0, 9.87e8, 4.2e12}) {
    const double back = static_cast<double>(parse_bytes(format_bytes(b), "x"));
    EXPECT_NEAR(back, b, 0.006 * b) << format_bytes(b);
  }
}

TEST(Units, CountsTakeTheirNounsPluralPastOne) {
  EXPECT_EQ(count_of(1, "device"), "1 device");
  EXPECT_EQ(count_of(4, "device"), "4 devices");
  EXPECT_EQ(count_of(0, "table"), "0 tables");
}

}  // namespace
}  // namespace embshard
