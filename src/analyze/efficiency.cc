// Kernel classes, achieved TFLOP/s and GB/s, the peak table (efficiency.h).
#include "src/analyze/efficiency.h"

#include <algorithm>
#include <deque>
#include <map>
#include <cstdio>
#include <span>
#include <unordered_map>

#include "src/base/ascii.h"
#include "src/trace/id_index.h"
#include "src/base/saturate.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

bool write_only_op(std::string_view op) {
  for (std::string_view w : {"aten::fill_", "aten::zero_", "aten::zeros", "aten::ones", "aten::full", "aten::zeros_like",
                             "aten::ones_like", "aten::full_like", "aten::normal_", "aten::uniform_", "aten::bernoulli_",
                             "aten::random_"}) {
    if (op == w) return true;
  }
  return false;
}

namespace {

// Dense peaks, no sparsity (docs/peaks.md has the source of every number).
// MI250 is one GCD: ROCm shows each of the package's two dies as a device.
constexpr DevicePeak kH100Sxm{"H100 SXM", 989.4, 494.7, 66.9, 3350};
constexpr DevicePeak kH100Pcie{"H100 PCIe", 756.5, 378.0, 51.2, 2000};
constexpr DevicePeak kH200{"H200", 989.4, 494.7, 66.9, 4800};
constexpr DevicePeak kA100_80{"A100 80GB SXM", 312, 156, 19.5, 2039};
constexpr DevicePeak kA100_80Pcie{"A100 80GB PCIe", 312, 156, 19.5, 1935};
constexpr DevicePeak kA100_40{"A100 40GB", 312, 156, 19.5, 1555};
constexpr DevicePeak kB200{"B200", 2250, 1125, 75, 8000};
constexpr DevicePeak kL4{"L4", 121, 60, 30.3, 300};
constexpr DevicePeak kMi300x{"MI300X", 1307.4, 653.7, 163.4, 5300};
constexpr DevicePeak kMi250Gcd{"MI250 (one GCD)", 181.0, 0, 22.6, 1638};

bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// A GEMM's dense peak on `d` for its dtype, 0 when the table has none.
double peak_tflops_of(const DevicePeak& d, std::string_view dtype) {
  if (dtype == "bf16" || dtype == "fp16" || dtype == "fp16/bf16") return d.bf16_tflops;
  // torch's default for fp32 matmuls is full fp32 (allow_tf32 off).
  if (dtype == "fp32") return d.fp32_tflops;
  return 0;
}

const DevicePeak* peak_for(std::string_view name, std::int64_t sms, std::int64_t mem, std::int64_t major,
                           std::int64_t minor) {
  if (has(name, "H200")) return &kH200;
  if (has(name, "H100")) {
    if (has(name, "PCIe") || sms == 114) return &kH100Pcie;
    if (has(name, "NVL")) return nullptr;  // not in the table
    if (has(name, "HBM3") || has(name, "SXM") || sms == 132) return &kH100Sxm;
    return nullptr;
  }
  if (has(name, "A100")) {
    if (mem > (48LL << 30)) return has(name, "PCIe") || has(name, "PCIE") ? &kA100_80Pcie : &kA100_80;
    return &kA100_40;
  }
  if (has(name, "B200")) return &kB200;
  // The L4 itself, not the L40 or L40S, whose names start the same (issue
  // 38's twentieth round: an L40 judged against the L4's peaks).
  if (name == "NVIDIA L4" || (has(name, "NVIDIA L4 ") && !has(name, "NVIDIA L40"))) return &kL4;
  if (has(name, "MI300X")) return &kMi300x;
  // ROCm names its devices by marketing name or "AMD Radeon Graphics": the
  // architecture (gfx90a: 9.0, gfx942: 9.4) and the CU count tell them apart.
  const bool amd = has(name, "AMD") || has(name, "Instinct");
  if (amd && (has(name, "MI250") || (major == 9 && minor == 0 && sms == 104))) return &kMi250Gcd;
  if (amd && major == 9 && minor == 4 && sms == 304) return &kMi300x;
  return nullptr;
}


// A kernel name's dtype: its template arguments' element type.
std::string dtype_of_kernel(std::string_view name) {
  if (has(name, "BFloat16") || has(name, "__nv_bfloat16") || has(name, "bfloat16")) return "bf16";
  if (has(name, "c10::Half") || has(name, "__half")) return "fp16";
  if (has(name, "<float") || has(name, "(float") || has(name, " float>")) return "fp32";
  return "";
}

// A GEMM kernel's input dtype where its name gives it and its op's Input
// type is not recorded (a tprof capture records shapes only): cuBLAS and
// CUTLASS name bf16 and f16; cuBLASLt's nvjet kernels say "_h_" for 16-bit
// inputs without telling fp16 from bf16 (the blog's bf16 runs launch
// nvjet_sm90_tst_..._h_bz_NNT), which share one dense peak on every device
// of docs/peaks.md: "fp16/bf16".
std::string dtype_of_gemm_name(std::string_view name) {
  if (has(name, "bf16")) return "bf16";
  if (has(name, "nvjet") && has(name, "_h_")) return "fp16/bf16";
  if (has(name, "f16") || has(name, "hgemm") || has(name, "h1688") || has(name, "h16816") || has(name, "h884")) return "fp16";
  return "";
}

double elem_bytes(std::string_view dtype) {
  if (dtype == "fp8") return 1;
  if (dtype == "bf16" || dtype == "fp16" || dtype == "fp16/bf16") return 2;
  if (dtype == "fp32") return 4;
  if (dtype == "fp64") return 8;
  return 0;
}

using Dims = std::vector<std::vector<std::int64_t>>;

double elements(const std::vector<std::int64_t>& d) {
  double n = 1;
  for (std::int64_t v : d) n *= static_cast<double>(std::max<std::int64_t>(0, v));
  return n;
}

// A GEMM's work from its op's input shapes: 2·M·N·K (times the batch)
// flops, and the elements of A, B and C, each moved once (the roofline's
// minimum traffic); flops 0 when the shapes are not a GEMM's.
struct GemmWork {
  double flops = 0;
  double elements = 0;  // of A, B and C
};

GemmWork gemm_work(std::string_view op, const Dims& in) {
  const std::string_view base = after_namespaces(op);
  auto mk_kn = [](const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) -> GemmWork {
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0]) return {};
    const double m = static_cast<double>(a[0]), k = static_cast<double>(a[1]), n = static_cast<double>(b[1]);
    return {2.0 * m * k * n, m * k + k * n + m * n};
  };
  if ((base == "mm" || base == "matmul") && in.size() >= 2) return mk_kn(in[0], in[1]);
  if (base == "addmm" && in.size() >= 3) return mk_kn(in[1], in[2]);
  if ((base == "bmm" && in.size() >= 2) || (base == "baddbmm" && in.size() >= 3)) {
    const auto& a = base == "bmm" ? in[0] : in[1];
    const auto& b = base == "bmm" ? in[1] : in[2];
    if (a.size() != 3 || b.size() != 3 || a[0] != b[0] || a[2] != b[1]) return {};
    const double bt = static_cast<double>(a[0]), m = static_cast<double>(a[1]), k = static_cast<double>(a[2]),
                 n = static_cast<double>(b[2]);
    return {2.0 * bt * m * k * n, bt * (m * k + k * n + m * n)};
  }
  if (base == "linear" && in.size() >= 2 && !in[0].empty() && in[1].size() == 2 && in[0].back() == in[1][1] &&
      in[1][1] > 0) {
    const double x = elements(in[0]), n = static_cast<double>(in[1][0]), k = static_cast<double>(in[1][1]);
    return {2.0 * x * n, x + n * k + x / k * n};
  }
  return {};
}

// An elementwise op's bytes: every tensor input read once, the output (the
// largest input's size) written once; 0 when no tensor input is known.
// Bytes an elementwise op moves: every tensor input read once and the
// largest written once; a write-only op writes its largest tensor only.
double elementwise_bytes(std::string_view op, const Dims& in, double elem) {
  // index_put_(self, indices, values): the values read and as many
  // elements of self written; self is not read (issue 38's eighteenth
  // round: an MoE un-permute counted at three [8192,7168] tensors, 1.5x
  // its traffic). (accumulate=True reads the written rows too: this is a
  // floor there.)
  if ((op == "aten::index_put_" || op == "aten::_index_put_impl_" || op == "aten::index_put") && in.size() >= 3 &&
      !in[2].empty()) {
    return 2.0 * elements(in[2]) * elem;
  }
  double read = 0, largest = 0;
  for (const auto& d : in) {
    if (d.empty()) continue;  // a scalar
    const double n = elements(d);
    read += n;
    largest = std::max(largest, n);
  }
  if (largest <= 0) return 0;
  return (write_only_op(op) ? largest : read + largest) * elem;
}

struct OpInfo {
  std::string name;
  Dims dims;
  std::string dtype;  // of the first tensor input with a type
  bool has_dims = false;
  KernelMatch by_op;  // match_launching_op(name), once per op rather than per kernel
};

// The two args efficiency reads, as text: the same for every instance of
// an op with the same shapes and types (the rest of the args, External
// id and sequence numbers, differs per instance).
struct OpArgs {
  std::string_view dims, types;
  bool found = false;  // both looked up in place (else: parse the whole object)
};

OpArgs op_args(const Trace& t, std::uint32_t e) {
  OpArgs a;
  const std::string_view raw = t.args_json(e);
  if (raw.empty()) {
    a.found = true;
    return a;
  }
  static constexpr std::string_view kKeys[] = {"Input Dims", "Input type"};
  std::string_view v[2];
  if (!member_values(raw, kKeys, v)) return a;
  // A value that is not an array: the whole object decides.
  const auto array = [](std::string_view x) { return !x.empty() && x.front() == '['; };
  if ((!v[0].empty() && !array(v[0])) || (!v[1].empty() && !array(v[1]))) return a;
  a.dims = v[0];
  a.types = v[1];
  a.found = true;
  return a;
}

void read_dims_and_type(const JsonValue* d, const JsonValue* ty, OpInfo* o) {
  if (d != nullptr && d->is_array()) {
    o->has_dims = true;
    o->dims = input_shapes(d);
  }
  if (ty != nullptr && ty->is_array()) {
    for (const JsonValue& v : ty->items()) {
      if (!v.is_string()) continue;
      o->dtype = dtype_of_type(v.text());
      if (!o->dtype.empty()) break;
    }
  }
}

// From the two arrays alone (op_args found them).
OpInfo op_info_of(std::string_view name, const OpArgs& a) {
  OpInfo o;
  o.name = std::string(name);
  Result<JsonValue> d = a.dims.empty() ? Result<JsonValue>(Error(ErrorCode::kParse, "")) : JsonValue::parse(a.dims);
  Result<JsonValue> ty = a.types.empty() ? Result<JsonValue>(Error(ErrorCode::kParse, "")) : JsonValue::parse(a.types);
  read_dims_and_type(d ? &*d : nullptr, ty ? &*ty : nullptr, &o);
  return o;
}

OpInfo op_info(const Trace& t, std::uint32_t e) {
  OpInfo o;
  o.name = std::string(t.name(e));
  const std::string_view raw = t.args_json(e);
  if (raw.empty()) return o;
  Result<JsonValue> args = JsonValue::parse(raw);
  if (!args.has_value() || !args->is_object()) return o;
  read_dims_and_type(args->find("Input Dims"), args->find("Input type"), &o);
  return o;
}

}  // namespace

std::vector<std::vector<std::int64_t>> input_shapes(const JsonValue* dims) {
  std::vector<std::vector<std::int64_t>> out;
  if (dims == nullptr || !dims->is_array()) return out;
  for (const JsonValue& item : dims->items()) {
    std::vector<std::int64_t> shape;
    if (item.is_array()) {
      for (const JsonValue& v : item.items()) shape.push_back(v.int_or(0));
    }
    out.push_back(std::move(shape));
  }
  return out;
}

std::string dtype_of_type(std::string_view t) {
  // c10::Float8_e4m3fn and friends say "Float" too: fp8 first.
  if (has(t, "Float8")) return "fp8";
  if (has(t, "BFloat16")) return "bf16";
  if (has(t, "Half")) return "fp16";
  if (t == "float" || has(t, "Float")) return "fp32";
  if (t == "double") return "fp64";
  return "";
}

const DevicePeak* device_peak(const Trace& t, std::string* device_name) {
  device_name->clear();
  const std::string_view raw = t.meta.top_level_json("deviceProperties");
  if (raw.empty()) return nullptr;
  Result<JsonValue> v = JsonValue::parse(raw);
  if (!v.has_value() || !v->is_array() || v->items().empty()) return nullptr;
  const JsonValue& d = v->items().front();
  const JsonValue* name = d.find("name");
  if (name == nullptr || !name->is_string()) return nullptr;
  *device_name = name->text();
  auto num = [&](std::string_view key) {
    const JsonValue* x = d.find(key);
    return x != nullptr ? x->int_or(-1) : -1;
  };
  return peak_for(*device_name, num("numSms"), num("totalGlobalMem"), num("computeMajor"), num("computeMinor"));
}

double Efficiency::ridge_flops_per_byte(std::string_view dtype) const {
  if (peak == nullptr) {
    // No device to judge by: the lowest ridge point of the table, so an
    // instance below it is bandwidth-bound on every GPU the table holds.
    double lowest = 0;
    for (const DevicePeak* d : {&kH100Sxm, &kH100Pcie, &kH200, &kA100_80, &kA100_80Pcie, &kA100_40, &kB200, &kL4,
                                &kMi300x, &kMi250Gcd}) {
      const double tflops = peak_tflops_of(*d, dtype);
      if (tflops <= 0 || d->hbm_gbps <= 0) continue;
      const double ridge = tflops * 1e3 / d->hbm_gbps;
      if (lowest == 0 || ridge < lowest) lowest = ridge;
    }
    return lowest;
  }
  const double tflops = gemm_peak_tflops(dtype);
  if (tflops <= 0 || peak->hbm_gbps <= 0) return 0;
  return tflops * 1e3 / peak->hbm_gbps;  // 1e12 FLOP/s over 1e9 B/s
}

double Efficiency::gemm_peak_tflops(std::string_view dtype) const {
  return peak == nullptr ? 0 : peak_tflops_of(*peak, dtype);
}

Efficiency compute_efficiency(const DiagnoseContext& c) {
  const Trace& t = c.trace;
  const EventColumns& ev = t.events;
  Efficiency out;
  out.peak = device_peak(t, &out.device_name);
  // Ops by External id: a kernel's own, else its launch call's (tprof's
  // captures put it on the launch only). The innermost op (the shortest)
  // wins where ids repeat.
  // (The first of equal ones: pairs in host_ops order, stably by duration.)
  std::vector<std::pair<std::int64_t, std::uint32_t>> id_pairs;
  for (std::uint32_t e : c.host_ops) {
    if (ev.kind[e] == EventKind::kCpuOp && ev.external_id[e] >= 0) id_pairs.emplace_back(ev.external_id[e], e);
  }
  std::stable_sort(id_pairs.begin(), id_pairs.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : ev.dur_ns[a.second] < ev.dur_ns[b.second];
  });
  const IdIndex op_by_id(std::move(id_pairs));
  std::unordered_map<std::uint32_t, const OpInfo*> ops;  // by op event
  // By the op's name, shapes and types: an op repeated step after step is
  // parsed once, and only its two arrays (parsing every op's whole args was
  // a fifth of diagnose on a 50 MB trace).
  struct ArgsKey {
    StrId name;
    std::string_view dims, types;
    bool operator==(const ArgsKey& o) const { return name == o.name && dims == o.dims && types == o.types; }
  };
  struct ArgsHash {
    std::size_t operator()(const ArgsKey& k) const {
      const std::hash<std::string_view> h;
      return (h(k.dims) * 31u + h(k.types)) * 31u + static_cast<std::size_t>(k.name);
    }
  };
  std::deque<OpInfo> unparsed;  // ops whose args op_args could not read in place (stable addresses)
  std::unordered_map<ArgsKey, OpInfo, ArgsHash> by_args;
  // Per name id: the kernel's index in out.kernels, and its class by name
  // (computed once per name, not per instance: string scans and a string
  // key per kernel instance were most of this pass).
  std::vector<std::uint32_t> kernel_of(t.strings.size(), kNoIndex);
  // Per name id: its row in the kernel-class table by its own name and by
  // its template arguments, looked up once (kUnset before).
  constexpr std::int16_t kUnset = -2, kNoRow = -1;
  const std::span<const KernelFamily> rows = kernel_families();
  std::vector<std::int16_t> name_row(t.strings.size(), kUnset);
  std::vector<std::int16_t> template_row(t.strings.size(), kUnset);
  const auto row_of = [&](KernelMatch m) {
    return m.family == nullptr ? kNoRow : static_cast<std::int16_t>(m.family - rows.data());
  };
  const auto match_of = [&](std::int16_t row) {
    return row < 0 ? KernelMatch{} : KernelMatch{rows[static_cast<std::size_t>(row)].cls, &rows[static_cast<std::size_t>(row)]};
  };
  // Per kernel, per instance: its work where its op's shapes give it.
  struct Sized {
    double amount = -1;  // flops (GEMM) or bytes (elementwise); -1 unknown
    double bytes = 0;    // GEMM: A, B and C
    std::int64_t ns = 0;
    bool bandwidth_bound = false;
  };
  std::vector<std::vector<Sized>> sized;
  // The ops that launched device work, their args read in file order (by
  // event): args are paged in from the source as they are read, and reads
  // in the device's time order paged it in again and again.
  std::vector<std::uint32_t> launched_by(c.device.size(), kNoIndex);  // per device op: its op event
  std::vector<std::uint32_t> launching;
  const auto encloses = [&](std::uint32_t o, std::uint32_t call) {
    return ev.lane[o] == ev.lane[call] && c.ts(o) <= c.ts(call) && c.end(o) >= c.end(call);
  };
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    std::int64_t id = ev.external_id[op.event];
    if (id < 0 && op.launch != kNoIndex) id = ev.external_id[op.launch];
    std::uint32_t e = id >= 0 ? op_by_id.find(id) : kNoIndex;
    // The op that launched it was running when its launch call was made.
    // An op by id that was not (some traces give the launch the id of an op
    // entered earlier: aten::as_strided, aten::_to_copy, while the call
    // sits in aten::addmm), a view op (it launches nothing), or an id no op
    // carries (the Switch-MoE forward's ops stop at id 2474, its kernels
    // go on), yields to the op around the launch call (issue 38 review: an
    // fp32 GEMM's rate lost to aten::as_strided's missing shapes).
    // Without its launch call in the trace, an op by id that starts after
    // the activity did not launch it: work launched before the recording
    // carries ids the recorded ops reuse (issue 38's nineteenth round: a
    // ResNet-50 step's first 694 kernels, the previous step's, read as
    // launched by its aten::empty and aten::mm).
    if (op.launch == kNoIndex && e != kNoIndex && c.ts(e) > op.start) e = kNoIndex;
    if (op.launch != kNoIndex && (e == kNoIndex || is_view_op(t.name(e)) || !encloses(e, op.launch))) {
      const std::uint32_t around = c.enclosing_op(op.launch, /*skip_views=*/true);
      if (around != kNoIndex) e = around;
    }
    if (e == kNoIndex) continue;
    launched_by[i] = e;
    if (ops.try_emplace(e, nullptr).second) launching.push_back(e);
  }
  std::sort(launching.begin(), launching.end());
  for (const std::uint32_t e : launching) {
    const OpArgs a = op_args(t, e);
    if (a.found) {
      auto [parsed, first] = by_args.try_emplace(ArgsKey{ev.name[e], a.dims, a.types});
      if (first) {
        parsed->second = op_info_of(t.name(e), a);
        parsed->second.by_op = match_launching_op(parsed->second.name);
      }
      ops[e] = &parsed->second;
    } else {
      unparsed.push_back(op_info(t, e));
      unparsed.back().by_op = match_launching_op(unparsed.back().name);
      ops[e] = &unparsed.back();
    }
  }
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    const std::int64_t dur = std::max<std::int64_t>(0, op.end - op.start);
    sat_acc(out.total_ns, dur);
    const std::string_view name = t.name(op.event);
    const OpInfo* info = launched_by[i] == kNoIndex ? nullptr : ops.at(launched_by[i]);
    const StrId name_id = ev.name[op.event];
    // The device activity's kind first: collectives (NCCL/RCCL) and copies
    // and memsets are what they are whatever launched them.
    static constexpr KernelFamily kCopies{KernelClass::kCopy, "memcpy/memset (device activity)", MatchOn::kName,
                                          MatchHow::kContains, ""};
    static constexpr KernelFamily kCollectives{KernelClass::kComm, "NCCL/RCCL/MSCCL++", MatchOn::kName,
                                               MatchHow::kContains, ""};
    KernelMatch m;
    bool gemm_by_name = false;  // a GEMM math kernel by its own name or template arguments
    if (op.cls == DeviceClass::kComm) {
      m = {KernelClass::kComm, &kCollectives};
    } else if (op.cls == DeviceClass::kMemcpy || op.cls == DeviceClass::kMemset) {
      m = {KernelClass::kCopy, &kCopies};
    } else {
      std::int16_t& by_name = name_row[name_id];
      if (by_name == kUnset) by_name = row_of(match_kernel_name(name));
      std::int16_t& by_template = template_row[name_id];
      KernelMatch tmpl;
      const KernelMatch named = match_of(by_name);
      const KernelMatch by_op = info != nullptr ? info->by_op : KernelMatch{};
      if (classify_kernel(named, by_op, KernelMatch{}).cls == KernelClass::kOther) {
        if (by_template == kUnset) by_template = row_of(match_kernel_template(name));
        tmpl = match_of(by_template);
      }
      m = classify_kernel(named, by_op, tmpl);
      if (m.cls == KernelClass::kGemm && named.cls != KernelClass::kGemm) {
        if (by_template == kUnset) by_template = row_of(match_kernel_template(name));
        tmpl = match_of(by_template);
      }
      const auto gemm_math = [](KernelMatch x) {
        return x.cls == KernelClass::kGemm && x.family->pattern != "splitkreduce";
      };
      gemm_by_name = gemm_math(named) || (named.cls == KernelClass::kOther && gemm_math(tmpl));
    }
    const KernelClass cls = m.cls;
    sat_acc(out.class_ns[static_cast<std::size_t>(cls)], dur);
    if (!op.before_recording) sat_acc(out.own_class_ns[static_cast<std::size_t>(cls)], dur);
    std::uint32_t& slot = kernel_of[name_id];
    const bool fresh = slot == kNoIndex;
    if (fresh) slot = static_cast<std::uint32_t>(out.kernels.size());
    const std::size_t index = slot;
    if (fresh) {
      KernelEfficiency k;
      k.name = std::string(name);
      k.cls = cls;
      if (m.family != nullptr) k.family = m.family->family;
      if (info != nullptr) k.op = info->name;
      k.dtype_from_op = info != nullptr && !info->dtype.empty();
      k.dtype = k.dtype_from_op ? info->dtype : dtype_of_kernel(name);
      if (k.dtype.empty() && cls == KernelClass::kGemm) k.dtype = dtype_of_gemm_name(name);
      out.kernels.push_back(std::move(k));
      sized.emplace_back();
    }
    KernelEfficiency& k = out.kernels[index];
    if (k.op.empty() && info != nullptr) {
      // The first instance launched before the window has no op: the first
      // one with an op decides (its class counted from here on).
      k.op = info->name;
      k.cls = cls;
      k.family = m.family != nullptr ? m.family->family : std::string_view();
      if (!info->dtype.empty()) {
        k.dtype = info->dtype;
        k.dtype_from_op = true;
      }
    }
    ++k.count;
    sat_acc(k.time_ns, dur);
    Sized one;
    one.ns = dur;
    if (info != nullptr && info->has_dims) {
      // The op's flops belong to its GEMM kernel, recognised by its own
      // name: not to the other kernels the op launches (a bias copy, a
      // memset, cuBLAS's split-K reduction), which would count them twice.
      if (cls == KernelClass::kGemm && gemm_by_name) {
        // This instance's dtype: its op's Input type, else the kernel's.
        const std::string& dtype = info->dtype.empty() ? k.dtype : info->dtype;
        const GemmWork w = gemm_work(info->name, info->dims);
        if (w.flops > 0) {
          one.amount = w.flops;
          one.bytes = w.elements * elem_bytes(dtype);
          const double ridge = out.ridge_flops_per_byte(dtype);
          one.bandwidth_bound = ridge > 0 && one.bytes > 0 && w.flops / one.bytes < ridge;
        }
      } else if (cls == KernelClass::kElementwise && elem_bytes(k.dtype) > 0) {
        const double b = elementwise_bytes(info->name, info->dims, elem_bytes(k.dtype));
        if (b > 0) one.amount = b;
      }
    }
    sized[index].push_back(one);
  }
  // A kernel's rate is over the instances whose amount is known (an
  // instance launched before the window has no op, so no shapes).
  for (std::size_t i = 0; i < out.kernels.size(); ++i) {
    KernelEfficiency& k = out.kernels[i];
    for (const Sized& one : sized[i]) {
      if (one.amount < 0) continue;
      if (k.cls == KernelClass::kGemm) {
        k.flops += one.amount;
        k.bytes += one.bytes;
        if (one.bandwidth_bound) {
          k.bw_flops += one.amount;
          k.bw_bytes += one.bytes;
          sat_acc(k.bw_time_ns, one.ns);
          ++k.bw_count;
        }
      } else {
        k.bytes += one.amount;
      }
      sat_acc(k.sized_time_ns, one.ns);
      ++k.sized_count;
    }
  }
  std::stable_sort(out.kernels.begin(), out.kernels.end(),
                   [](const KernelEfficiency& a, const KernelEfficiency& b) { return a.time_ns > b.time_ns; });
  return out;
}

TensorCores tensor_cores(const Trace& t) {
  TensorCores tc;
  const std::string_view raw = t.meta.top_level_json("deviceProperties");
  if (raw.empty()) return tc;
  Result<JsonValue> v = JsonValue::parse(raw);
  if (!v.has_value() || !v->is_array() || v->items().empty()) return tc;
  const JsonValue& d = v->items().front();
  auto num = [&](std::string_view key) {
    const JsonValue* x = d.find(key);
    return x != nullptr ? x->int_or(-1) : -1;
  };
  if (const JsonValue* name = d.find("name"); name != nullptr && name->is_string()) tc.device = name->text();
  tc.major = num("computeMajor");
  tc.minor = num("computeMinor");
  tc.num_sms = num("numSms");
  if (tc.major < 0 || tc.minor < 0) return tc;
  tc.known = true;
  // ROCm reports the gfx architecture as the compute capability (gfx90a:
  // 9.0, gfx942: 9.4); its names say AMD or Instinct, or only "AMD Radeon
  // Graphics". gfx906 (MI50, Radeon VII) is 9.0 too, with 60 CUs and no
  // matrix cores: 9.0 needs MI100/MI200's CU count.
  tc.amd = has(tc.device, "AMD") || has(tc.device, "Instinct") || has(tc.device, "Radeon");
  if (tc.amd) {
    const bool matrix = tc.major == 9 && ((tc.minor == 0 && tc.num_sms >= 104) || tc.minor >= 4);
    tc.fp16 = tc.bf16 = matrix;
    return tc;
  }
  tc.fp16 = tc.major >= 7;
  tc.bf16 = tc.tf32 = tc.major >= 8;
  return tc;
}

namespace {

bool has_tensor_core_mark(const std::string& lower_name, std::string_view name) {
  for (std::string_view p : {"tensorop", "s1688", "s16816", "h1688", "h16816", "i8816", "hmma", "wmma", "xmma", "wgmma",
                             "_mma", "tf32", "bf16", "f16", "nvjet", "mfma", "triton"}) {
    if (has(lower_name, p)) return true;
  }
  return has(name, "_MI");  // Tensile: matrix instructions (MFMA)
}

}  // namespace

Fp32Math fp32_math(const KernelEfficiency& k) {
  const std::string full = ascii_lower(k.name);
  // cuBLAS's SIMT kernels carry xmma in their name and say ffma (fp32 fused
  // multiply-add on the CUDA cores): sm90_xmma_gemm_f32f32_f32f32_f32_..._ffma_...
  // (a GH200 fp32 TransformerEncoder, issue 38's third round). A 16-bit or
  // TF32 operand in the name is still a tensor-core kernel.
  const bool simt = has(full, "ffma") || has(full, "simt");
  if (simt && (has(full, "gemm") || has(full, "fprop") || has(full, "dgrad") || has(full, "wgrad")) &&
      !has(full, "tf32") && !has(full, "bf16") && !has(full, "f16") && !has(full, "hmma")) {
    return Fp32Math::kByName;
  }
  if (has_tensor_core_mark(full, k.name) || has(full, "gemv")) return Fp32Math::kNo;
  const std::string base = ascii_lower(kernel_own_name(k.name));
  if (has(base, "sgemm") || has(base, "scudnn")) return Fp32Math::kByName;
  // (dgrad_alg1_engine too: issue 38's fifteenth round, a T4 ResNet-50's
  // 1.009 ms backward-data kernel left out beside its dgrad_engine.)
  if ((base.starts_with("dgrad_engine") || base.starts_with("dgrad_alg") || base.starts_with("wgrad_alg")) &&
      has(full, "<float,")) {
    return Fp32Math::kByName;
  }
  // cuDNN's other fp32 convolution algorithms: Winograd's transforms and
  // implicit GEMM on float templates (issue 38's thirteenth round: a T4
  // ResNet-18's fp32 share read 39.9% on sgemm/scudnn names where the
  // Winograd transforms brought the convolutions to 68.5%). FFT convolution
  // too, inside a convolution op: its float transforms and its complex
  // GEMM (gcgemm) are the convolution's fp32 time, which autocast moves to
  // a tensor-core algorithm (the same review: 7.8 ms of gcgemm and 8.1 ms
  // of fft2d left out).
  if ((has(base, "winograd") || has(base, "implicit_convolve")) && has(full, "<float,")) {
    return Fp32Math::kByName;
  }
  if ((has(base, "gcgemm") || (base.starts_with("fft") && has(full, "<float,"))) && is_conv_kernel(k)) {
    return Fp32Math::kByName;
  }
  if (k.cls == KernelClass::kGemm && k.dtype_from_op && k.dtype == "fp32" &&
      (has(base, "gemm") || k.name.starts_with("Cijk_"))) {
    return Fp32Math::kByOpType;
  }
  return Fp32Math::kNo;
}

bool tf32_math(std::string_view name) {
  const std::string full = ascii_lower(name);
  return has(full, "tf32") || has(full, "s1688");
}

bool is_conv_kernel(const KernelEfficiency& k) {
  // A library GEMM kernel inside a convolution op (cuDNN lowering to sgemm)
  // is still convolution work.
  return k.cls == KernelClass::kConv || match_launching_op(k.op).cls == KernelClass::kConv;
}

GemmRate gemm_rate(const Efficiency& e) {
  GemmRate r;
  double flops = 0, at_peak_s = 0, bw_bytes = 0;
  std::int64_t unpeaked_ns = 0;
  std::map<std::string, std::int64_t> by_dtype;  // measured time by dtype
  for (const KernelEfficiency& k : e.kernels) {
    if (k.cls != KernelClass::kGemm || k.sized_time_ns <= 0) continue;
    sat_acc(r.measured_ns, k.sized_time_ns);
    sat_acc(by_dtype[k.dtype], k.sized_time_ns);
    sat_acc(r.bw_time_ns, k.bw_time_ns);
    bw_bytes += k.bw_bytes;
    const double f = k.flops - k.bw_flops;
    const std::int64_t ns = k.sized_time_ns - k.bw_time_ns;
    if (ns <= 0) continue;
    flops += f;
    sat_acc(r.time_ns, ns);
    const double peak = e.gemm_peak_tflops(k.dtype);
    if (peak > 0) {
      at_peak_s += f / (peak * 1e12);
    } else {
      sat_acc(unpeaked_ns, ns);
    }
  }
  // The dtype of most of the measured time; unknown ("") counts as one.
  for (const auto& [dtype, ns] : by_dtype) {
    const double share = r.measured_ns > 0 ? static_cast<double>(ns) / static_cast<double>(r.measured_ns) : 0;
    if (share > r.dtype_share) r.dtype = dtype, r.dtype_share = share;
  }
  if (r.time_ns > 0) r.tflops = flops / static_cast<double>(r.time_ns) / 1e3;
  if (r.bw_time_ns > 0) r.bw_gbps = bw_bytes / static_cast<double>(r.bw_time_ns);
  // The dense peak of the compute-bound instances' dtypes, weighted by
  // their flops; none when any of that time has no peak (dtype unknown).
  if (at_peak_s > 0 && unpeaked_ns == 0) r.peak_tflops = flops / at_peak_s / 1e12;
  r.implausible = (r.peak_tflops > 0 && r.tflops > 1.05 * r.peak_tflops) ||
                  (e.peak != nullptr && r.bw_gbps > 1.5 * e.peak->hbm_gbps);
  return r;
}

namespace {

std::string rate_text(const char* format, double v) {
  char b[48];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

// "measured on all of it" or "measured on the 2.1% of GPU time whose shapes
// are known".
std::string coverage_text(const Efficiency& e, std::int64_t measured_ns) {
  const std::int64_t gemm_ns = e.class_ns[static_cast<std::size_t>(KernelClass::kGemm)];
  if (measured_ns >= gemm_ns) return "measured on all of it";
  return "measured on the " + format_pct(100.0 * static_cast<double>(measured_ns) / static_cast<double>(e.total_ns)) +
         " of GPU time whose shapes are known";
}

// The dtype part of a peak: "bf16", or "bf16 (mixed dtypes: bf16 for 80.0%
// of the measured time)".
std::string dtype_text(const GemmRate& g) {
  if (g.dtype_share >= 0.99) return g.dtype;
  return g.dtype + " (mixed dtypes: " + g.dtype + " for " + format_pct(100.0 * g.dtype_share) +
         " of the measured time)";
}

}  // namespace

std::string efficiency_text(const Efficiency& e) {
  if (e.total_ns <= 0) return "";
  std::vector<std::pair<double, KernelClass>> classes;
  for (int k = 0; k < kKernelClassCount; ++k) {
    const double s = e.share(static_cast<KernelClass>(k));
    if (s >= 0.05) classes.emplace_back(s, static_cast<KernelClass>(k));
  }
  std::stable_sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  const GemmRate g = gemm_rate(e);
  for (const auto& [share, k] : classes) {
    if (!out.empty()) out += ", ";
    const std::string name = k == KernelClass::kOther ? "other (not recognised)" : std::string(kernel_class_name(k));
    out += name + " " + format_pct(100.0 * share);
    if (out.size() == name.size() + 1 + format_pct(100.0 * share).size()) out += " of GPU time";
    if (k != KernelClass::kGemm || g.measured_ns <= 0) continue;
    // Bandwidth-bound GEMMs (below the ridge point) on bytes/s against HBM.
    // Below 1% of GPU time the part is immaterial and left out of the text.
    std::string bw;
    const double bw_of_total = static_cast<double>(g.bw_time_ns) / static_cast<double>(e.total_ns);
    const std::string ridge = e.peak != nullptr ? "the " + std::string(e.peak->name) + "'s ridge point"
                                                : std::string("the ridge point of every GPU in the peak table");
    const std::string of_hbm = e.peak != nullptr ? ", " + format_pct(100.0 * g.bw_gbps / e.peak->hbm_gbps) +
                                                       " of its HBM bandwidth"
                                                 : std::string();
    if (g.bw_time_ns > 0 && bw_of_total >= 0.01) {
      bw = format_pct(100.0 * bw_of_total) + " bandwidth-bound (arithmetic intensity below " + ridge + ") at " +
           rate_text("%.2f TB/s", g.bw_gbps / 1e3) + of_hbm;
    }
    // The rest in TFLOP/s against the dense peak of their dtypes.
    std::string compute, why;
    if (g.time_ns > 0 && g.tflops > 0) {
      compute = rate_text("%.0f TFLOP/s", g.tflops);
      if (g.peak_tflops > 0) {
        why = format_pct(100.0 * g.tflops / g.peak_tflops) + " of the " + std::string(e.peak->name) + "'s dense " +
              dtype_text(g) + " peak";
      } else if (e.peak == nullptr) {
        why = e.device_name.empty() ? "no deviceProperties in the trace: no peak to compare with"
                                    : e.device_name + " is not in the peak table";
      } else {
        why = "dtype not recorded: no peak to compare with";
      }
    }
    // Faster than the dense peak (or 1.5× the HBM bandwidth, as the
    // elementwise rule allows for L2) cannot be: the shapes are not those of
    // the kernels they were joined to (External ids that link a GEMM kernel
    // to aten::view, as older traces do). No rate then.
    if (g.implausible) {
      out += " (no rate: the shapes of the ops its kernels are linked to give more than the " +
             std::string(e.peak->name) + "'s peak, so those links are wrong)";
      continue;
    }
    const std::string covered = coverage_text(e, g.measured_ns);
    if (bw.empty()) {
      // "GEMM 84.6% of GPU time at 813 TFLOP/s (82.2% of the H100 SXM's
      // dense bf16 peak, measured on all of it)"
      if (!compute.empty()) out += " at " + compute + " (" + why + ", " + covered + ")";
    } else if (compute.empty() && g.bw_time_ns >= e.class_ns[static_cast<std::size_t>(KernelClass::kGemm)]) {
      // "GEMM 63.9% of GPU time (all bandwidth-bound: arithmetic intensity
      // below the H100 SXM's ridge point, at 0.39 TB/s, 11.5% of its HBM
      // bandwidth; measured on all of it)"
      out += " (all bandwidth-bound: arithmetic intensity below " + ridge + ", at " +
             rate_text("%.2f TB/s", g.bw_gbps / 1e3) + of_hbm + "; " + covered + ")";
    } else if (compute.empty()) {
      out += " (" + bw + "; " + covered + ")";
    } else {
      // "GEMM 33.8% (28.4% bandwidth-bound … at 1.09 TB/s, 32.6% of its HBM
      // bandwidth; 5.4% at 712 TFLOP/s, 71.9% of …'s dense bf16 peak;
      // measured on all of it)"
      out += " (" + bw + "; " +
             format_pct(100.0 * static_cast<double>(g.time_ns) / static_cast<double>(e.total_ns)) + " at " + compute +
             ", " + why + "; " + covered + ")";
    }
  }
  return out;
}

}  // namespace tprof::internal
