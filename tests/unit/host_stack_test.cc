// Host work named from the stack (src/analyze/host_stack.h) and gaps called
// rare only when they are (kernel_gap): small built traces for the helper's
// choices, and the real traces of tests/data where the names and the
// recurrence must hold (and where they must not be invented).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/host_stack.h"
#include "tests/support/kineto_events.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

using internal::DiagnoseContext;
using internal::HostFrame;
using internal::HostWorkKind;
using internal::Interval;
using testing::corr;
using testing::doc;
using testing::kernel;
using testing::launch;
using testing::step;
using testing::x;

std::string data(const std::string& rel) { return std::string(TPROF_SOURCE_DIR) + "/tests/data/" + rel; }

std::string py(const std::string& name, double ts, double dur) { return x("python_function", name, 1, 1, ts, dur); }

// The frame host_frame names for [from, to) µs on the thread of pid 1 tid 1.
HostFrame frame_of(const std::vector<std::string>& events, double from, double to) {
  Result<Trace> t = read_trace_bytes(doc(events));
  EXPECT_TRUE(t);
  if (!t) return {};
  const DiagnoseContext c(*t);
  std::uint32_t lane = kNoIndex;
  for (std::uint32_t e : c.host_ops) lane = t->events.lane[e];
  const auto ns = [](double us) { return static_cast<std::int64_t>(us * 1000); };
  return internal::host_frame(c, lane, {Interval{ns(from), ns(to)}});
}

const Evidence::Field* field(const Finding& f, std::string_view key) { return f.evidence.find(key); }
std::string text(const Finding& f, std::string_view key) {
  const Evidence::Field* p = f.evidence.find(key);
  return p != nullptr ? p->s : std::string();
}

TEST(HostStack, NamesTheDeepestFrameHoldingMostAndSkipsBuiltins) {
  // main > preprocess (90 of 100 µs) > resize (60) > <built-in method ...> (58).
  const HostFrame f = frame_of({py("train.py(10): main", 0, 100), py("app/data.py(5): preprocess", 5, 90),
                                py("app/data.py(20): resize", 10, 60),
                                py("<built-in method interpolate of PyCapsule object at 0x7f00dead>", 11, 58)},
                               0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.name, "app/data.py(20): resize");
  EXPECT_EQ(f.inner, "<built-in method interpolate of PyCapsule object>");  // the address cut
  EXPECT_EQ(f.held_ns, 60'000);
  EXPECT_EQ(f.stretch_ns, 100'000);
}

TEST(HostStack, RepeatedCallsCountTogetherAndRecursionOnce) {
  // Ten 8 µs calls of one function in 100 µs: 80% of the stretch, though no
  // single call holds more than 8%; a recursive call inside one is not
  // counted twice.
  std::vector<std::string> ev = {py("bench.py(1): run", 0, 100)};
  for (int i = 0; i < 10; ++i) ev.push_back(py("transformers/image_transforms.py(300): resize", 10 * i + 1, 8));
  ev.push_back(py("transformers/image_transforms.py(300): resize", 2, 4));
  const HostFrame f = frame_of(ev, 0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.name, "transformers/image_transforms.py(300): resize");
  EXPECT_EQ(f.held_ns, 80'000);
  EXPECT_EQ(f.kind, HostWorkKind::kPreprocessing);
}

TEST(HostStack, KindsFollowTheFrames) {
  // Inductor's wrapper: the generated `call` holds the stretch, its
  // assert_size_stride calls below it.
  std::vector<std::string> ind = {py("/tmp/torchinductor_me/ab/cabcd.py(400): call", 0, 100)};
  for (int i = 0; i < 40; ++i) ind.push_back(py("<built-in function assert_size_stride>", 2 + 2.4 * i, 2));
  HostFrame f = frame_of(ind, 0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.kind, HostWorkKind::kInductorWrapper);
  EXPECT_EQ(f.name, "/tmp/torchinductor_me/ab/cabcd.py(400): call");

  // DDP's buffer broadcast is torch's own code, yet a kind the advice knows.
  f = frame_of({py("train.py(3): step", 0, 100), py("nn.Module: DistributedDataParallel_0", 1, 98),
                py("torch/nn/parallel/distributed.py(2155): _sync_buffers", 2, 90),
                py("<built-in method _broadcast_coalesced of PyCapsule object at 0x1>", 3, 85)},
               0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.kind, HostWorkKind::kDdpBuffers);
  EXPECT_EQ(f.name, "torch/nn/parallel/distributed.py(2155): _sync_buffers");

  // A scipy zoom inside a single-process DataLoader's __next__ is
  // preprocessing in the main process.
  f = frame_of({py("torch/utils/data/dataloader.py(631): __next__", 0, 100), py("ds.py(9): __getitem__", 2, 95),
                py("scipy/ndimage/_interpolation.py(700): zoom", 3, 90)},
               0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.kind, HostWorkKind::kPreprocessing);
  EXPECT_EQ(f.name, "scipy/ndimage/_interpolation.py(700): zoom");

  // numpy is preprocessing under a dataset's __getitem__, not in a metric.
  f = frame_of({py("ds.py(9): __getitem__", 0, 100), py("numpy/lib/_function_base_impl.py(10): pad", 2, 90)}, 0, 100);
  EXPECT_EQ(f.kind, HostWorkKind::kPreprocessing);
  f = frame_of({py("train.py(40): log_metrics", 0, 100), py("numpy/core/fromnumeric.py(10): mean", 2, 90)}, 0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.kind, HostWorkKind::kOther);

  // The iterator alone (workers fill the queue): the DataLoader.
  f = frame_of({py("torch/utils/data/dataloader.py(631): __next__", 0, 100), py("queue.py(180): get", 1, 98)}, 0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.kind, HostWorkKind::kDataLoader);
  EXPECT_EQ(f.name, "torch/utils/data/dataloader.py(631): __next__");
}

TEST(HostStack, ABatchHandedOverByTheWorkersIsItsOwnKind) {
  // The main process inside a multi-process DataLoader's __next__, mostly
  // unpickling the batch: each storage's file descriptor fetched from the
  // worker (issue 38's eighth round: TensorRT runs, 85% of each wait in
  // rebuild_storage_fd, 50-70 us in the queue itself).
  const HostFrame f = frame_of({py("torch/utils/data/dataloader.py(1299): _next_data", 0, 100),
                                py("multiprocessing/queues.py(98): get", 1, 95),
                                py("<built-in function loads>", 8, 85),
                                py("torch/multiprocessing/reductions.py(494): rebuild_storage_fd", 10, 70),
                                py("multiprocessing/resource_sharer.py(55): detach", 12, 60)},
                               0, 100);
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.kind, HostWorkKind::kBatchHandover);
  EXPECT_EQ(f.name, "multiprocessing/resource_sharer.py(55): detach");
  EXPECT_EQ(std::string(internal::host_work_kind_id(f.kind)), "batch_handover");
}

TEST(HostStack, AThreadThatWaitsNamesTheThreadItWaitsFor) {
  // A scheduler thread (tid 1) waits on a lock while a forward thread (tid
  // 2) compiles a Triton kernel, and a watchdog thread (tid 3) sleeps: the
  // stretch is the forward thread's compile, named with the waiting frame.
  Result<Trace> t = read_trace_bytes(doc({
      x("python_function", "sched.py(10): resolve_last_batch_result", 1, 1, 0, 100),
      x("python_function", "<built-in method acquire of _thread.lock object at 0x7f>", 1, 1, 1, 98),
      x("python_function", "worker.py(5): forward", 1, 2, 0, 100),
      x("python_function", "triton/compiler/compiler.py(214): compile", 1, 2, 5, 90),
      x("python_function", "watchdog.py(3): run", 1, 3, 0, 100),
      x("python_function", "<built-in function sleep>", 1, 3, 0, 100),
  }));
  ASSERT_TRUE(t);
  const DiagnoseContext c(*t);
  std::uint32_t sched = kNoIndex, forward = kNoIndex;
  for (std::uint32_t e : c.host_ops) {
    if (c.name(e) == "sched.py(10): resolve_last_batch_result") sched = t->events.lane[e];
    if (c.name(e) == "worker.py(5): forward") forward = t->events.lane[e];
  }
  const HostFrame f = internal::host_frame(c, sched, {Interval{0, 100'000}});
  ASSERT_TRUE(f.found());
  EXPECT_EQ(f.kind, HostWorkKind::kJitCompile);
  EXPECT_EQ(f.name, "triton/compiler/compiler.py(214): compile");
  EXPECT_EQ(f.lane, forward);
  EXPECT_EQ(f.waiter, "sched.py(10): resolve_last_batch_result");
  EXPECT_NE(internal::host_frame_text(f).find("on another thread, while the launching thread sits in "
                                              "sched.py(10): resolve_last_batch_result"),
            std::string::npos);
  // A thread whose own frames work is named as before.
  EXPECT_TRUE(internal::host_frame(c, forward, {Interval{0, 100'000}}).waiter.empty());
}

TEST(HostStack, NothingNamedWithoutAFrameHoldingMost) {
  // Two functions of 40 µs each: neither holds most of the stretch.
  EXPECT_FALSE(frame_of({py("a.py(1): f", 0, 40), py("a.py(2): g", 50, 40)}, 0, 100).found());
  // ProfilerStep#N names nothing.
  EXPECT_FALSE(frame_of({step(1, 0, 100)}, 0, 100).found());
  // Nothing recorded.
  EXPECT_FALSE(frame_of({x("cpu_op", "aten::add", 1, 1, 0, 100)}, 0, 100).found());
}

// H100 TimeSformer inference with with_stack (tests/data/PROVENANCE.md): the
// 218 ms before the step's first kernel are Hugging Face's video
// preprocessing, not set-up (issue 38, Why 2).
TEST(HostStack, TimesformerPreprocessIsNamedNotSetUp) {
  const std::string path = data("public/tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz");
  Result<Trace> t = read_trace(path);
  ASSERT_TRUE(t) << path;
  const Diagnosis d = diagnose(*t);
  const std::string name = "transformers/models/videomae/image_processing_videomae.py(178): _preprocess_image";
  const Finding* low = nullptr;
  for (const Finding& f : d.findings) {
    if (f.id == "low_gpu_utilization") low = &f;
    // The rules that name host work (pageable_memcpy's "set-up" is about
    // the input's copy, another rule's wording).
    if (f.id == "low_gpu_utilization" || f.id == "kernel_gap" || f.id == "dataloader_bound") {
      EXPECT_EQ(f.advice.find("set-up"), std::string::npos) << f.id << ": " << f.advice;
    }
  }
  ASSERT_NE(low, nullptr);
  EXPECT_EQ(text(*low, "host_frame"), name);
  EXPECT_EQ(text(*low, "host_work_kind"), "preprocessing");
  EXPECT_NE(low->advice.find("DataLoader workers"), std::string::npos) << low->advice;
  EXPECT_NE(low->advice.find(name), std::string::npos) << low->advice;
  EXPECT_EQ(field(*low, "host_stack"), nullptr);  // a stack: nothing to ask for
  // host_frame_ns: the calls of that function inside the longest stretch of
  // host work (first device activity, back to the stretch's start), summed
  // here from the events themselves.
  std::int64_t first_device = INT64_MAX;
  for (std::uint32_t e = 0; e < t->events.ts_ns.size(); ++e) {
    if (is_device_kind(t->events.kind[e]) && t->events.kind[e] != EventKind::kGpuUserAnnotation) {
      first_device = std::min(first_device, t->events.ts_ns[e]);
    }
  }
  const std::int64_t stretch = field(*low, "setup_host_work_ns")->i;
  std::int64_t held = 0;
  for (std::uint32_t e = 0; e < t->events.ts_ns.size(); ++e) {
    if (t->name(e) != name) continue;
    const std::int64_t s = std::max(t->events.ts_ns[e], first_device - stretch);
    const std::int64_t end = std::min(t->events.ts_ns[e] + t->events.dur_ns[e], first_device);
    if (end > s) held += end - s;
  }
  EXPECT_EQ(field(*low, "host_frame_ns")->i, held);
  EXPECT_GT(2 * held, stretch);
  // The verdict names it too.
  EXPECT_NE(d.summary.find(name), std::string::npos) << d.summary;
}

// Traces without a Python stack: the host work is not named, and the first
// finding that cannot name it asks for with_stack=True, once.
TEST(HostStack, WithoutAStackAskOnceAndNameNothing) {
  for (const std::string rel : {"public/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
                                "public/hta/trace_filter/sampled_rank-1.json.gz"}) {
    Result<Trace> t = read_trace(data(rel));
    ASSERT_TRUE(t) << rel;
    const Diagnosis d = diagnose(*t);
    int asked = 0;
    for (const Finding& f : d.findings) {
      // No Python function to name (an annotation may: sampled_rank-1's
      // rare gaps lie in "Optimizer.step#Shampoo.step").
      EXPECT_EQ(text(f, "host_frame").find(".py("), std::string::npos) << rel << " " << f.id;
      if (text(f, "host_stack") == "not recorded, with_stack=True asked") {
        ++asked;
        EXPECT_NE(f.advice.find("with_stack=True"), std::string::npos) << f.advice;
      }
    }
    EXPECT_EQ(asked, 1) << rel;
    EXPECT_EQ(d.summary.find(".py("), std::string::npos) << d.summary;
  }
  // A stack, and host work it names: nobody asks.
  Result<Trace> t = read_trace(data("public/tracelens/h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"));
  ASSERT_TRUE(t);
  for (const Finding& f : diagnose(*t).findings) EXPECT_EQ(f.advice.find("with_stack=True"), std::string::npos) << f.id;
}

// Three steps; in each, twenty A -> B gaps of 2 µs and, in `long_in` steps,
// one of 3 ms between the same kernels; `frame` (a Python function) holds
// that host time when given, with 100 assert_size_stride calls inside.
std::string spikes_trace(int long_in, const std::string& frame = "", bool with_op = true) {
  std::vector<std::string> ev;
  int id = 1;
  for (int s = 0; s < 3; ++s) {
    const double t0 = 10'000.0 * s;
    ev.push_back(step(s + 1, t0, 9'000));
    double t = t0 + 10;
    for (int i = 0; i < 20; ++i) {
      const bool spike = i == 10 && s < long_in;
      if (spike) t += 3'000;  // the host works 3 ms before launching the next pair
      ev.push_back(launch(t, 2, id));
      ev.push_back(kernel("A", 7, t + 5, 20, id++));
      ev.push_back(launch(t + 3, 2, id));
      ev.push_back(kernel("B", 7, t + 27, 20, id++));
      t += 49;
      if (spike && with_op) ev.push_back(x("cpu_op", "aten::unique", 1, 1, t - 3'049, 3'000));
      if (spike && !frame.empty()) {
        ev.push_back(py(frame, t - 3'049, 3'000));
        for (int k = 0; k < 100; ++k) ev.push_back(py("<built-in function assert_size_stride>", t - 3'045 + 29.0 * k, 25));
      }
    }
  }
  return doc(ev);
}

std::vector<Finding> gaps_of(const std::string& text) {
  Result<Trace> t = read_trace_bytes(text);
  EXPECT_TRUE(t);
  if (!t) return {};
  return diagnose(*t, {.only = {"kernel_gap"}}).findings;
}

TEST(KernelGapRecurrence, LongGapInEveryStepIsRecurringNotRare) {
  std::vector<Finding> f = gaps_of(spikes_trace(3));
  const auto recurring = std::find_if(f.begin(), f.end(), [](const Finding& g) { return text(g, "pattern") == "recurring"; });
  ASSERT_NE(recurring, f.end());
  EXPECT_EQ(text(*recurring, "shape"), "long_gap_in_most_steps");
  EXPECT_EQ(field(*recurring, "occurrences")->i, 3);
  EXPECT_EQ(field(*recurring, "units")->i, 3);
  EXPECT_NE(recurring->title.find("in 3 of 3 steps"), std::string::npos) << recurring->title;
  EXPECT_NE(recurring->title.find("usually"), std::string::npos) << recurring->title;
  EXPECT_GT(recurring->impact_per_step_ns, 2'000'000);  // a per-step saving, about one gap a step
  for (const Finding& g : f) EXPECT_NE(text(g, "pattern"), "one-off") << g.title;
}

// Host work in the gaps that the stack names as Inductor's generated
// wrapper: its fix (graphs), not the DataLoader's.
TEST(KernelGapRecurrence, NamedHostWorkGetsItsFix) {
  std::vector<Finding> f = gaps_of(spikes_trace(3, "/tmp/torchinductor_me/x7/cx7abc.py(812): call"));
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(text(f[0], "host_work_kind"), "inductor_wrapper");
  EXPECT_EQ(text(f[0], "host_frame"), "/tmp/torchinductor_me/x7/cx7abc.py(812): call");
  EXPECT_NE(f[0].advice.find("reduce-overhead"), std::string::npos) << f[0].advice;
  EXPECT_EQ(f[0].advice.find("DataLoader"), std::string::npos) << f[0].advice;
  // No stack, an op holding the gaps: the op names the work.
  f = gaps_of(spikes_trace(3));
  ASSERT_FALSE(f.empty());
  EXPECT_TRUE(f[0].advice.starts_with("Make aten::unique cheaper or move it out of the step")) << f[0].advice;
  // No stack and no op: the gap's fix asks for one.
  f = gaps_of(spikes_trace(3, "", /*with_op=*/false));
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(text(f[0], "host_stack"), "not recorded, with_stack=True asked");
  EXPECT_NE(f[0].advice.find("with_stack=True"), std::string::npos) << f[0].advice;
}

TEST(KernelGapRecurrence, LongGapInOneStepStaysAOneOff) {
  std::vector<Finding> f = gaps_of(spikes_trace(1));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(text(f[0], "pattern"), "one-off");
  EXPECT_NE(f[0].title.find("One-off GPU gap"), std::string::npos) << f[0].title;
}

// A real trace: tprof's own H100 capture (cold, eager) has its long gap in
// the cold first step only, and it stays a one-off.
TEST(KernelGapRecurrence, ColdStepGapsStayOneOffs) {
  Result<Trace> t = read_trace(data("gpu/h100-tprof/4096_bf16_cold_eager.json"));
  ASSERT_TRUE(t);
  bool seen = false;
  for (const Finding& f : diagnose(*t, {.only = {"kernel_gap"}}).findings) {
    if (text(f, "pattern") != "one-off") continue;
    seen = true;
    const Evidence::Field* steps = field(f, "steps");
    ASSERT_NE(steps, nullptr);
    EXPECT_EQ(steps->ints, std::vector<std::int64_t>{1});
  }
  EXPECT_TRUE(seen);
}

// MI300X DDP training, three steps (tests/data/PROVENANCE.md): six gaps
// were "rare", five of them between Memcpy DtoD pairs in every step. The
// sixth, step 15's 2.157 ms, is no one-off either: its stream waits there
// in every step, other streams covering it in the other two
// (KernelGap.AStreamWaitInEveryStepIsNotAOneOff).
TEST(KernelGapRecurrence, RecurringPairsLeaveTheRareGaps) {
  Result<Trace> t = read_trace(data("public/tracelens/mi300/resnet_act_checkpoint.json.gz"));
  ASSERT_TRUE(t);
  int one_offs = 0, per_step = 0;
  for (const Finding& f : diagnose(*t, {.only = {"kernel_gap"}}).findings) {
    if (text(f, "pattern") == "one-off") ++one_offs;
    if (text(f, "pattern") == "per_step_wait") {
      ++per_step;
      EXPECT_NE(f.title.find("GPU gap of 2.157 ms in step 15"), std::string::npos) << f.title;
    }
  }
  EXPECT_EQ(one_offs, 0);
  EXPECT_EQ(per_step, 1);
}

}  // namespace
}  // namespace tprof
