// Progress lines: plain lines at most every tenth in logs, a redrawn bar on terminals.
#include "parity/common/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace parity {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Everything written to `file` so far.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[256];
  size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, read);
  return text;
}

TEST(Progress, EtaFromTheAverageRateSoFar) {
  // 1 of 3 units in 10 s: 2 units left at 10 s each.
  EXPECT_EQ(Progress::eta_text(10, 1, 3), "20s");
  // 1 of 4 in 30 s: 90 s left.
  EXPECT_EQ(Progress::eta_text(30, 1, 4), "1:30");
  EXPECT_EQ(Progress::eta_text(0, 0, 4), "");
}

TEST(Progress, LogsGetOneLinePerTenthAndPhaseWithoutCarriageReturns) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress progress("parity run", 100, file, /*interactive=*/false);
    progress.phase("ddp_ref");
    for (int64_t done = 1; done <= 100; ++done) progress.update(done);
  }
  const std::string text = contents(file);
  std::fclose(file);
  EXPECT_THAT(text, HasSubstr("parity run: ddp_ref (0% done)\n"));
  EXPECT_THAT(text, HasSubstr("parity run: ddp_ref 50%"));
  EXPECT_THAT(text, HasSubstr("parity run: ddp_ref 100%"));
  EXPECT_THAT(text, Not(HasSubstr("\r")));
  // The phase line and one line per tenth from 10% to 100%.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 11);
}

TEST(Progress, TerminalsGetABarRedrawnInPlace) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress progress("parity run", 4, file, /*interactive=*/true);
    progress.phase("pmap_engine");
    progress.update(2);
  }
  const std::string text = contents(file);
  std::fclose(file);
  EXPECT_THAT(text, HasSubstr("\r\033[Kparity run [############............]  50% pmap_engine"));
  EXPECT_EQ(text.back(), '\n');  // the destructor ends the line
}

}  // namespace
}  // namespace parity
