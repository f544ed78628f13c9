// Tables that current PyTorch (2.11, CUDA, on an H100) printed for the blog's
// matmul_add (tests/data/gpu/h100-torch-2.11), against `tprof table` on the
// trace torch exported in the same run.
//
// Not byte for byte, by necessity: torch aggregates its in-memory events,
// and two things about them do not survive export_chrome_trace():
//  - a gpu_user_annotation's duration is 2 ns longer in the JSON than in
//    torch's event (every one of them, in all eight runs);
//  - torch sums float microseconds per event, so an average that lands on
//    a tie (x.xxx5) rounds either way.
// So the structure must be identical (every name, row order, call counts,
// the header and totals lines) and every number within 0.02% or one unit
// in the last printed digit of torch's. A kernel charged to the wrong op,
// a missing row or a wrong total is far outside that.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "src/base/file.h"
#include "tests/support/run_cli.h"

namespace tprof {
namespace {

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

// Splits a line into number tokens (with their text) and the rest.
struct Tokens {
  std::string shape;                  // the line with every number replaced by '#'
  std::vector<std::string> numbers;   // as printed
};

Tokens tokenize(const std::string& line) {
  static const std::regex kNum(R"(-?\d+\.\d+|\d+)");
  Tokens t;
  std::size_t last = 0;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), kNum); it != std::sregex_iterator(); ++it) {
    t.shape.append(line, last, static_cast<std::size_t>(it->position()) - last);
    t.shape.push_back('#');
    t.numbers.push_back(it->str());
    last = static_cast<std::size_t>(it->position() + it->length());
  }
  t.shape.append(line, last, std::string::npos);
  return t;
}

bool close_enough(const std::string& ours, const std::string& torch) {
  const double a = std::stod(ours), b = std::stod(torch);
  const std::size_t dot = torch.find('.');
  const double ulp = dot == std::string::npos ? 1.0 : std::pow(10.0, -static_cast<double>(torch.size() - dot - 1));
  return std::fabs(a - b) <= std::max(ulp * 1.0001, 2e-4 * std::fabs(b));
}

std::vector<std::string> traces() {
  std::vector<std::string> out;
  const std::filesystem::path dir = std::filesystem::path(TPROF_TEST_DATA) / "gpu" / "h100-torch-2.11";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class TorchGpuTables : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchGpuTables, SameTableAsTorch) {
  const std::string trace = GetParam();
  const std::string txt = trace.substr(0, trace.size() - 5) + ".txt";
  auto expected = internal::read_file(txt);
  ASSERT_TRUE(expected) << txt;
  testing::CliResult r =
      testing::run_cli(TPROF_BIN, {"--quiet", "table", trace, "--sort-by", "cuda_time_total", "--row-limit", "15"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> want = lines(*expected), got = lines(r.out);
  ASSERT_EQ(got.size(), want.size()) << r.out;
  int numbers = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Tokens w = tokenize(want[i]), g = tokenize(got[i]);
    ASSERT_EQ(g.shape, w.shape) << "line " << i + 1 << "\n ours: " << got[i] << "\ntorch: " << want[i];
    ASSERT_EQ(g.numbers.size(), w.numbers.size());
    for (std::size_t k = 0; k < w.numbers.size(); ++k) {
      EXPECT_TRUE(close_enough(g.numbers[k], w.numbers[k]))
          << "line " << i + 1 << " number " << k << ": ours " << g.numbers[k] << ", torch " << w.numbers[k];
      ++numbers;
    }
  }
  EXPECT_GT(numbers, 100);
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = std::filesystem::path(info.param).stem().string();
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return "t" + n;
}

INSTANTIATE_TEST_SUITE_P(H100Torch211, TorchGpuTables, ::testing::ValuesIn(traces()), case_name);

TEST(TorchGpuTablesData, HasAllEightRuns) { EXPECT_EQ(traces().size(), 8u); }

}  // namespace
}  // namespace tprof
