#include <gtest/gtest.h>

#include <stdexcept>

#include "embshard/util/reporter.h"

namespace embshard {
namespace {

TEST(Reporter, ProgressReportsStartUpdatesAndFinish) {
  CaptureReporter r;
  {
    Progress p(r, "job", 10, 2);  // resumed after 2
    for (uint64_t i = 3; i <= 10; ++i) p.update(i, "item");
    p.finish("done");
  }
  const auto events = r.events();
  ASSERT_GE(events.size(), 3u);  // start, updates (the capture wants them all), finish
  EXPECT_EQ(events.front().label, "job");
  EXPECT_EQ(events.front().done, 2u);
  EXPECT_NE(events.front().note.find("resuming after 2"), std::string::npos);
  EXPECT_FALSE(events.front().final);
  EXPECT_EQ(events.back().done, 10u);
  EXPECT_EQ(events.back().total, 10u);
  EXPECT_TRUE(events.back().final);
  EXPECT_EQ(events.back().note, "done");
  int finals = 0;
  for (const auto& e : events) finals += e.final ? 1 : 0;
  EXPECT_EQ(finals, 1);  // finish() once, and not again from the destructor
}

TEST(Reporter, AJobCutShortByAnErrorStillEnds) {
  CaptureReporter r;
  try {
    Progress p(r, "job", 5);
    p.update(1);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  ASSERT_FALSE(r.events().empty());
  EXPECT_TRUE(r.events().back().final);
  EXPECT_EQ(r.events().back().note, "stopped");
}

TEST(Reporter, NotesAreKeptInOrder) {
  CaptureReporter r;
  r.note("a");
  r.note("b");
  ASSERT_EQ(r.notes().size(), 2u);
  EXPECT_EQ(r.notes()[0], "a");
  EXPECT_EQ(r.notes()[1], "b");
  silent_reporter().note("nothing");  // says nothing, never fails
}

TEST(Reporter, FormatsDurations) {
  EXPECT_EQ(format_duration(7), "7s");
  EXPECT_EQ(format_duration(245), "4:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace embshard
