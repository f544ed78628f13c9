// Our causal graph and critical path against what HolisticTraceAnalysis
// (HTA, hta/analyzers/critical_path_analysis.py) builds on its own test
// traces (tests/data/public/hta/critical_path). The tables below are HTA's
// launch-delay, kernel-kernel-delay and sync edges, dumped by running HTA
// HEAD f4d0062 with CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1 (as its
// tests do); HTA's summaries are from the same runs. Events are matched by
// name and start time, not by HTA's position in traceEvents.
// docs/critical-path.md, "Agreement with HTA", explains each difference.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/causal.h"
#include "tprof/read.h"

namespace tprof {
namespace {

std::string hta_trace(const std::string& rel) {
  return std::string(TPROF_SOURCE_DIR) + "/tests/data/public/hta/critical_path/" + rel;
}
const char* const kEventSync = "cuda_event_sync/event_sync_trace.json.gz";
const char* const kMultiStream = "cuda_event_sync_multi_stream/event_sync_trace.json.gz";
const char* const kAlexnet = "alexnet/benchmark_result_2869224_1695835535_trace.json.gz";

// One edge of HTA's graph. kind: 'L' kernel launch delay (runtime start →
// kernel start), 'K' kernel-kernel delay (kernel end → next kernel start on
// its stream), 'S' sync dependency (kernel end → a waiting call's end, or →
// a kernel's start for cudaStreamWaitEvent). src/dst: HTA's event id (its
// 0-based position in traceEvents), whether the node is the event's start,
// the first characters of the event's name and its ts in µs. weight_us and
// on_path as HTA has them.
struct HtaEdge {
  char kind;
  int src;
  bool src_start;
  const char* src_name;
  std::int64_t src_ts_us;
  int dst;
  bool dst_start;
  const char* dst_name;
  std::int64_t dst_ts_us;
  int weight_us;
  int on_path;
};

// cuda_event_sync, annotation "ProfilerStep", instance 0 (ProfilerStep#100).
const HtaEdge kEventSyncEdges[] = {
  {'L', 13, true, "cudaLaunchKernel", 1707417525512110, 11, true, "void at::native:", 1707417525512145, 35, 0},
  {'L', 17, true, "cudaLaunchKernel", 1707417525512182, 15, true, "void at::native:", 1707417525512194, 12, 0},
  {'L', 21, true, "cudaLaunchKernel", 1707417525512221, 19, true, "void at::native:", 1707417525512235, 14, 0},
  {'L', 25, true, "cudaMemcpyAsync", 1707417525512252, 23, true, "Memcpy DtoH (Dev", 1707417525512270, 18, 0},
  {'S', 23, false, "Memcpy DtoH (Dev", 1707417525512270, 29, false, "cudaStreamSynchr", 1707417525512282, 0, 0},
  {'L', 35, true, "cudaLaunchKernel", 1707417525512362, 33, true, "at::cuda::(anony", 1707417525512372, 10, 1},
  {'S', 33, false, "at::cuda::(anony", 1707417525512372, 41, false, "cudaEventSynchro", 1707417525512382, 0, 1},
  {'S', 33, false, "at::cuda::(anony", 1707417525512372, 45, false, "cudaEventQuery", 1707417525512419, 0, 0},
  {'S', 33, false, "at::cuda::(anony", 1707417525512372, 51, false, "cudaDeviceSynchr", 1707417525512474, 0, 0},
};

// cuda_event_sync_multi_stream, the whole trace (annotation "").
const HtaEdge kMultiStreamEdges[] = {
  {'L', 20, true, "cudaMemsetAsync", 1712867402348643, 18, true, "Memset (Device)", 1712867402348667, 24, 0},
  {'L', 26, true, "cudaLaunchKernel", 1712867402348670, 24, true, "ampere_sgemm_128", 1712867402348700, 30, 0},
  {'S', 24, false, "ampere_sgemm_128", 1712867402348700, 46, false, "cudaEventQuery", 1712867402349056, 0, 0},
  {'S', 24, false, "ampere_sgemm_128", 1712867402348700, 84, true, "Memset (Device)", 1712867402368034, 0, 0},
  {'S', 24, false, "ampere_sgemm_128", 1712867402348700, 104, false, "cudaDeviceSynchr", 1712867402368166, 0, 0},
  {'L', 50, true, "cudaMemsetAsync", 1712867402349066, 48, true, "Memset (Device)", 1712867402349081, 0, 0},
  {'L', 56, true, "cudaLaunchKernel", 1712867402349081, 54, true, "ampere_sgemm_128", 1712867402349097, 0, 0},
  {'K', 48, false, "Memset (Device)", 1712867402349081, 54, true, "ampere_sgemm_128", 1712867402349097, 15, 0},
  {'S', 54, false, "ampere_sgemm_128", 1712867402349097, 82, false, "cudaEventQuery", 1712867402368008, 0, 0},
  {'S', 54, false, "ampere_sgemm_128", 1712867402349097, 104, false, "cudaDeviceSynchr", 1712867402368166, 0, 0},
  {'L', 86, true, "cudaMemsetAsync", 1712867402368020, 84, true, "Memset (Device)", 1712867402368034, 14, 1},
  {'K', 84, false, "Memset (Device)", 1712867402368034, 90, true, "ampere_sgemm_128", 1712867402368050, 15, 1},
  {'L', 92, true, "cudaLaunchKernel", 1712867402368035, 90, true, "ampere_sgemm_128", 1712867402368050, 0, 0},
  {'S', 90, false, "ampere_sgemm_128", 1712867402368050, 104, false, "cudaDeviceSynchr", 1712867402368166, 0, 0},
};

// alexnet, annotation "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
// instance 1 (HTA id 278, ts 1695835585827782, dur 36356).
const HtaEdge kAlexnetWindowEdges[] = {
  {'L', 1023, true, "cudaLaunchKernel", 1695835585836625, 1021, true, "void cask_cudnn:", 1695835585836665, 40, 0},
  {'L', 1029, true, "cudaLaunchKernel", 1695835585836673, 1027, true, "cudnn_ampere_scu", 1695835585836685, 12, 0},
  {'L', 1033, true, "cudaLaunchKernel", 1695835585836733, 1031, true, "void at::native:", 1695835585837720, 0, 0},
  {'L', 1037, true, "cudaLaunchKernel", 1695835585836806, 1035, true, "void at::native:", 1695835585837908, 0, 0},
  {'K', 1027, false, "cudnn_ampere_scu", 1695835585836685, 1031, true, "void at::native:", 1695835585837720, 1, 0},
  {'K', 1031, false, "void at::native:", 1695835585837720, 1035, true, "void at::native:", 1695835585837908, 1, 0},
  {'L', 1045, true, "cudaLaunchKernel", 1695835585845173, 1043, true, "void at::native:", 1695835585845193, 20, 0},
  {'S', 1043, false, "void at::native:", 1695835585845193, 1089, true, "void fft2d_r2c_3", 1695835585860094, 0, 0},
  {'L', 1085, true, "cudaLaunchKernel", 1695835585860038, 1083, true, "void fft2d_r2c_3", 1695835585860056, 18, 0},
  {'L', 1091, true, "cudaLaunchKernel", 1695835585860064, 1089, true, "void fft2d_r2c_3", 1695835585860094, 30, 1},
  {'L', 1107, true, "cudaLaunchKernel", 1695835585860122, 1105, true, "ampere_gcgemm_64", 1695835585860162, 0, 0},
  {'S', 1083, false, "void fft2d_r2c_3", 1695835585860056, 1105, true, "ampere_gcgemm_64", 1695835585860162, 0, 0},
  {'L', 1111, true, "cudaLaunchKernel", 1695835585860137, 1109, true, "void fft2d_c2r_3", 1695835585860487, 0, 0},
  {'K', 1089, false, "void fft2d_r2c_3", 1695835585860094, 1105, true, "ampere_gcgemm_64", 1695835585860162, 1, 1},
  {'L', 1163, true, "cudaLaunchKernel", 1695835585860193, 1161, true, "void at::native:", 1695835585860634, 0, 0},
  {'L', 1167, true, "cudaLaunchKernel", 1695835585860244, 1165, true, "void at::native:", 1695835585860772, 0, 0},
  {'L', 1171, true, "cudaLaunchKernel", 1695835585860297, 1169, true, "void at::native:", 1695835585860880, 0, 0},
  {'L', 1183, true, "cudaLaunchKernel", 1695835585860380, 1181, true, "void cudnn::ops:", 1695835585861004, 0, 0},
  {'L', 1187, true, "cudaLaunchKernel", 1695835585860394, 1185, true, "void cudnn::ops:", 1695835585861033, 0, 0},
  {'L', 1195, true, "cudaLaunchKernel", 1695835585860416, 1193, true, "sm80_xmma_fprop_", 1695835585861045, 0, 0},
  {'L', 1199, true, "cudaLaunchKernel", 1695835585860456, 1197, true, "void at::native:", 1695835585861307, 0, 0},
  {'K', 1105, false, "ampere_gcgemm_64", 1695835585860162, 1109, true, "void fft2d_c2r_3", 1695835585860487, 2, 1},
  {'L', 1203, true, "cudaLaunchKernel", 1695835585860490, 1201, true, "void at::native:", 1695835585861376, 0, 0},
  {'L', 1215, true, "cudaLaunchKernel", 1695835585860557, 1213, true, "void cudnn::ops:", 1695835585861428, 0, 0},
  {'L', 1219, true, "cudaLaunchKernel", 1695835585860567, 1217, true, "void cudnn::ops:", 1695835585861483, 0, 0},
  {'L', 1227, true, "cudaLaunchKernel", 1695835585860579, 1225, true, "sm80_xmma_fprop_", 1695835585861497, 0, 0},
  {'L', 1231, true, "cudaLaunchKernel", 1695835585860601, 1229, true, "void at::native:", 1695835585861883, 0, 0},
  {'L', 1235, true, "cudaLaunchKernel", 1695835585860629, 1233, true, "void at::native:", 1695835585861929, 0, 0},
  {'S', 1109, false, "void fft2d_c2r_3", 1695835585860487, 1161, true, "void at::native:", 1695835585860634, 0, 1},
  {'S', 1109, false, "void fft2d_c2r_3", 1695835585860487, 1341, false, "cudaDeviceSynchr", 1695835585862981, 0, 0},
  {'L', 1247, true, "cudaLaunchKernel", 1695835585860690, 1245, true, "void cudnn::ops:", 1695835585861946, 0, 0},
  {'L', 1251, true, "cudaLaunchKernel", 1695835585860699, 1249, true, "void cudnn::ops:", 1695835585861973, 0, 0},
  {'L', 1259, true, "cudaLaunchKernel", 1695835585860710, 1257, true, "sm80_xmma_fprop_", 1695835585861984, 0, 0},
  {'L', 1263, true, "cudaLaunchKernel", 1695835585860731, 1261, true, "void at::native:", 1695835585862252, 0, 0},
  {'L', 1267, true, "cudaLaunchKernel", 1695835585860759, 1265, true, "void at::native:", 1695835585862298, 0, 0},
  {'K', 1161, false, "void at::native:", 1695835585860634, 1165, true, "void at::native:", 1695835585860772, 2, 1},
  {'L', 1271, true, "cudaLaunchKernel", 1695835585860798, 1269, true, "void at::native:", 1695835585862314, 0, 0},
  {'K', 1165, false, "void at::native:", 1695835585860772, 1169, true, "void at::native:", 1695835585860880, 2, 1},
  {'L', 1275, true, "cudaLaunchKernel", 1695835585860882, 1273, true, "void at::native:", 1695835585862352, 0, 0},
  {'L', 1281, true, "cudaLaunchKernel", 1695835585860994, 1279, true, "void at::native:", 1695835585862490, 0, 0},
  {'K', 1169, false, "void at::native:", 1695835585860880, 1181, true, "void cudnn::ops:", 1695835585861004, 1, 1},
  {'K', 1181, false, "void cudnn::ops:", 1695835585861004, 1185, true, "void cudnn::ops:", 1695835585861033, 2, 1},
  {'K', 1185, false, "void cudnn::ops:", 1695835585861033, 1193, true, "sm80_xmma_fprop_", 1695835585861045, 1, 1},
  {'K', 1193, false, "sm80_xmma_fprop_", 1695835585861045, 1197, true, "void at::native:", 1695835585861307, 2, 1},
  {'K', 1197, false, "void at::native:", 1695835585861307, 1201, true, "void at::native:", 1695835585861376, 2, 1},
  {'K', 1201, false, "void at::native:", 1695835585861376, 1213, true, "void cudnn::ops:", 1695835585861428, 1, 1},
  {'K', 1213, false, "void cudnn::ops:", 1695835585861428, 1217, true, "void cudnn::ops:", 1695835585861483, 2, 1},
  {'K', 1217, false, "void cudnn::ops:", 1695835585861483, 1225, true, "sm80_xmma_fprop_", 1695835585861497, 1, 1},
  {'K', 1225, false, "sm80_xmma_fprop_", 1695835585861497, 1229, true, "void at::native:", 1695835585861883, 2, 1},
  {'K', 1229, false, "void at::native:", 1695835585861883, 1233, true, "void at::native:", 1695835585861929, 1, 1},
  {'K', 1233, false, "void at::native:", 1695835585861929, 1245, true, "void cudnn::ops:", 1695835585861946, 2, 1},
  {'K', 1245, false, "void cudnn::ops:", 1695835585861946, 1249, true, "void cudnn::ops:", 1695835585861973, 1, 1},
  {'K', 1249, false, "void cudnn::ops:", 1695835585861973, 1257, true, "sm80_xmma_fprop_", 1695835585861984, 1, 1},
  {'K', 1257, false, "sm80_xmma_fprop_", 1695835585861984, 1261, true, "void at::native:", 1695835585862252, 2, 1},
  {'K', 1261, false, "void at::native:", 1695835585862252, 1265, true, "void at::native:", 1695835585862298, 1, 1},
  {'K', 1265, false, "void at::native:", 1695835585862298, 1269, true, "void at::native:", 1695835585862314, 1, 1},
  {'K', 1269, false, "void at::native:", 1695835585862314, 1273, true, "void at::native:", 1695835585862352, 2, 1},
  {'L', 1293, true, "cudaLaunchKernel", 1695835585862421, 1291, true, "ampere_sgemm_32x", 1695835585862501, 0, 0},
  {'L', 1297, true, "cudaLaunchKernel", 1695835585862455, 1295, true, "void epilogue::i", 1695835585863314, 0, 0},
  {'K', 1273, false, "void at::native:", 1695835585862352, 1279, true, "void at::native:", 1695835585862490, 2, 1},
  {'K', 1279, false, "void at::native:", 1695835585862490, 1291, true, "ampere_sgemm_32x", 1695835585862501, 1, 1},
  {'L', 1301, true, "cudaLaunchKernel", 1695835585862504, 1299, true, "void at::native:", 1695835585863324, 0, 0},
  {'L', 1307, true, "cudaLaunchKernel", 1695835585862574, 1305, true, "void at::native:", 1695835585863330, 0, 0},
  {'L', 1315, true, "cudaLaunchKernel", 1695835585862646, 1313, true, "ampere_sgemm_32x", 1695835585863338, 0, 0},
  {'L', 1319, true, "cudaLaunchKernel", 1695835585862656, 1317, true, "void epilogue::i", 1695835585863732, 0, 0},
  {'L', 1323, true, "cudaLaunchKernel", 1695835585862697, 1321, true, "void at::native:", 1695835585863741, 0, 0},
  {'L', 1329, true, "cudaMemsetAsync", 1695835585862754, 1327, true, "Memset (Device)", 1695835585863748, 0, 0},
  {'L', 1333, true, "cudaLaunchKernel", 1695835585862768, 1331, true, "ampere_sgemm_32x", 1695835585863753, 0, 0},
  {'L', 1337, true, "cudaLaunchKernel", 1695835585862777, 1335, true, "void epilogue::i", 1695835585863852, 0, 0},
  {'K', 1291, false, "ampere_sgemm_32x", 1695835585862501, 1295, true, "void epilogue::i", 1695835585863314, 1, 1},
  {'K', 1295, false, "void epilogue::i", 1695835585863314, 1299, true, "void at::native:", 1695835585863324, 2, 1},
  {'K', 1299, false, "void at::native:", 1695835585863324, 1305, true, "void at::native:", 1695835585863330, 1, 1},
  {'K', 1305, false, "void at::native:", 1695835585863330, 1313, true, "ampere_sgemm_32x", 1695835585863338, 1, 1},
  {'K', 1313, false, "ampere_sgemm_32x", 1695835585863338, 1317, true, "void epilogue::i", 1695835585863732, 1, 1},
  {'K', 1317, false, "void epilogue::i", 1695835585863732, 1321, true, "void at::native:", 1695835585863741, 2, 1},
  {'K', 1321, false, "void at::native:", 1695835585863741, 1327, true, "Memset (Device)", 1695835585863748, 2, 1},
  {'K', 1327, false, "Memset (Device)", 1695835585863748, 1331, true, "ampere_sgemm_32x", 1695835585863753, 3, 1},
  {'K', 1331, false, "ampere_sgemm_32x", 1695835585863753, 1335, true, "void epilogue::i", 1695835585863852, 2, 1},
  {'S', 1335, false, "void epilogue::i", 1695835585863852, 1341, false, "cudaDeviceSynchr", 1695835585862981, 0, 0},
};

// alexnet, the whole trace (annotation ""): HTA's sync edges only.
const HtaEdge kAlexnetWholeSyncEdges[] = {
  {'S', 373, false, "Memcpy HtoD (Pag", 1695835572943613, 379, false, "cudaStreamSynchr", 1695835572943621, 0, 0},
  {'S', 381, false, "Memcpy HtoD (Pag", 1695835572943889, 387, false, "cudaStreamSynchr", 1695835572943886, 0, 0},
  {'S', 393, false, "Memcpy HtoD (Pag", 1695835572953043, 399, false, "cudaStreamSynchr", 1695835572953091, 0, 0},
  {'S', 401, false, "Memcpy HtoD (Pag", 1695835572953246, 407, false, "cudaStreamSynchr", 1695835572953243, 0, 0},
  {'S', 409, false, "Memcpy HtoD (Pag", 1695835572953569, 415, false, "cudaStreamSynchr", 1695835572953944, 0, 0},
  {'S', 417, false, "Memcpy HtoD (Pag", 1695835572954070, 423, false, "cudaStreamSynchr", 1695835572954065, 0, 0},
  {'S', 425, false, "Memcpy HtoD (Pag", 1695835572954369, 431, false, "cudaStreamSynchr", 1695835572954955, 0, 0},
  {'S', 433, false, "Memcpy HtoD (Pag", 1695835572955059, 439, false, "cudaStreamSynchr", 1695835572955056, 0, 0},
  {'S', 441, false, "Memcpy HtoD (Pag", 1695835572955360, 447, false, "cudaStreamSynchr", 1695835572955676, 0, 0},
  {'S', 449, false, "Memcpy HtoD (Pag", 1695835572955796, 455, false, "cudaStreamSynchr", 1695835572955792, 0, 0},
  {'S', 461, false, "Memcpy HtoD (Pag", 1695835572958056, 467, false, "cudaStreamSynchr", 1695835572992749, 0, 0},
  {'S', 469, false, "Memcpy HtoD (Pag", 1695835572992929, 475, false, "cudaStreamSynchr", 1695835572992925, 0, 0},
  {'S', 481, false, "Memcpy HtoD (Pag", 1695835572996001, 487, false, "cudaStreamSynchr", 1695835573011410, 0, 0},
  {'S', 489, false, "Memcpy HtoD (Pag", 1695835573011588, 495, false, "cudaStreamSynchr", 1695835573011584, 0, 0},
  {'S', 501, false, "Memcpy HtoD (Pag", 1695835573014944, 507, false, "cudaStreamSynchr", 1695835573018574, 0, 0},
  {'S', 509, false, "Memcpy HtoD (Pag", 1695835573018713, 515, false, "cudaStreamSynchr", 1695835573018709, 0, 0},
  {'S', 523, false, "void at::native:", 1695835573023613, 529, false, "cudaDeviceSynchr", 1695835573040618, 0, 0},
  {'S', 695, false, "void at::native:", 1695835584707551, 741, true, "void fft2d_r2c_3", 1695835585751593, 0, 0},
  {'S', 735, false, "void fft2d_r2c_3", 1695835585751556, 757, true, "ampere_gcgemm_64", 1695835585755714, 0, 0},
  {'S', 761, false, "void fft2d_c2r_3", 1695835585756501, 813, true, "void at::native:", 1695835585756985, 0, 0},
  {'S', 761, false, "void fft2d_c2r_3", 1695835585756501, 1001, false, "cudaDeviceSynchr", 1695835585783845, 0, 0},
  {'S', 761, false, "void fft2d_c2r_3", 1695835585756501, 1007, false, "cudaDeviceSynchr", 1695835585827832, 0, 0},
  {'S', 995, false, "void epilogue::i", 1695835585783808, 1001, false, "cudaDeviceSynchr", 1695835585783845, 0, 0},
  {'S', 995, false, "void epilogue::i", 1695835585783808, 1007, false, "cudaDeviceSynchr", 1695835585827832, 0, 0},
  {'S', 1043, false, "void at::native:", 1695835585845193, 1089, true, "void fft2d_r2c_3", 1695835585860094, 0, 0},
  {'S', 1083, false, "void fft2d_r2c_3", 1695835585860056, 1105, true, "ampere_gcgemm_64", 1695835585860162, 0, 0},
  {'S', 1109, false, "void fft2d_c2r_3", 1695835585860487, 1161, true, "void at::native:", 1695835585860634, 0, 0},
  {'S', 1109, false, "void fft2d_c2r_3", 1695835585860487, 1341, false, "cudaDeviceSynchr", 1695835585862981, 0, 0},
  {'S', 1109, false, "void fft2d_c2r_3", 1695835585860487, 1365, false, "cudaDeviceSynchr", 1695835585939612, 0, 0},
  {'S', 1335, false, "void epilogue::i", 1695835585863852, 1341, false, "cudaDeviceSynchr", 1695835585862981, 0, 0},
  {'S', 1335, false, "void epilogue::i", 1695835585863852, 1365, false, "cudaDeviceSynchr", 1695835585939612, 0, 0},
};

// HTA's critical path breakdown in µs (get_critical_path_breakdown grouped
// by bound_by; the "" group of dependency and sync edges is always 0).
struct HtaSummary {
  std::int64_t cpu_us, gpu_compute_us, kernel_kernel_us, launch_us;
  std::int64_t total_us() const { return cpu_us + gpu_compute_us + kernel_kernel_us + launch_us; }
};
constexpr HtaSummary kEventSyncSummary{2365, 36, 0, 10};
constexpr HtaSummary kMultiStreamSummary{1025, 124, 15, 14};
constexpr HtaSummary kAlexnetSummary{32042, 3712, 50, 30};

struct Loaded {
  Trace trace;
  CausalGraph g;
};

Loaded load(const char* rel) {
  auto t = read_trace(hta_trace(rel));
  EXPECT_TRUE(t.has_value()) << rel << ": " << (t ? "" : t.error().to_string());
  if (!t) return {};
  Loaded l{std::move(*t), {}};
  l.g = build_causal_graph(l.trace);
  return l;
}

// Our event for an HTA event: the complete event whose name starts with
// `prefix` and that starts at ts_us.
std::uint32_t find_event(const Trace& t, std::string_view prefix, std::int64_t ts_us) {
  std::uint32_t found = kNoIndex;
  int n = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] != Phase::kComplete || t.events.ts_ns[e] != ts_us * 1000) continue;
    if (!t.name(e).starts_with(prefix)) continue;
    found = e;
    ++n;
  }
  EXPECT_EQ(n, 1) << prefix << " at " << ts_us;
  return found;
}

std::uint32_t node_of(const CausalGraph& g, std::uint32_t e, bool start) {
  const std::uint32_t a = e == kNoIndex ? kNoIndex : g.activity_of_event[e];
  if (a == kNoIndex) return kNoIndex;
  return start ? CausalGraph::begin_node(a) : CausalGraph::end_node(a);
}

const CausalEdge* find_edge(const CausalGraph& g, EdgeType type, std::uint32_t from, std::uint32_t to) {
  if (from == kNoIndex || to == kNoIndex) return nullptr;
  for (std::uint32_t i = g.in_begin[to]; i < g.in_begin[to + 1]; ++i)
    if (g.edges[i].from == from && g.edges[i].type == type) return &g.edges[i];
  return nullptr;
}

std::int64_t end_ns(const Trace& t, std::uint32_t e) { return t.events.ts_ns[e] + t.events.dur_ns[e]; }

// How HTA's edges map onto ours.
struct Agreement {
  int same_index = 0;       // HTA's id is our event index
  int launch = 0;           // 'L' found as our launch edge
  int kernel_kernel = 0;    // 'K' found as our stream edge
  int sync = 0;             // 'S' into a call found as our sync edge
  int stream_wait = 0;      // 'S' into a kernel found as our stream-wait edge
  int not_waited = 0;       // 'S' into a call whose awaited work ended before the call began
  int missing = 0;          // anything else: HTA has it, we do not
  std::vector<const CausalEdge*> matched;  // ours, per matched sync or stream-wait edge
};

template <std::size_t N>
Agreement compare(const Loaded& l, const HtaEdge (&hta)[N]) {
  Agreement a;
  for (const HtaEdge& h : hta) {
    const std::uint32_t s = find_event(l.trace, h.src_name, h.src_ts_us);
    const std::uint32_t d = find_event(l.trace, h.dst_name, h.dst_ts_us);
    if (s == kNoIndex || d == kNoIndex) {
      ++a.missing;
      continue;
    }
    a.same_index += (s == static_cast<std::uint32_t>(h.src)) + (d == static_cast<std::uint32_t>(h.dst));
    const std::uint32_t from = node_of(l.g, s, h.src_start), to = node_of(l.g, d, h.dst_start);
    const CausalEdge* ours = nullptr;
    if (h.kind == 'L') {
      ours = find_edge(l.g, EdgeType::kLaunch, from, to);
      // Ours starts at the call's end when the kernel started after it returned.
      if (ours == nullptr) ours = find_edge(l.g, EdgeType::kLaunch, from + 1, to);
      a.launch += ours != nullptr;
    } else if (h.kind == 'K') {
      ours = find_edge(l.g, EdgeType::kStream, from, to);
      a.kernel_kernel += ours != nullptr;
    } else if (h.dst_start) {
      ours = find_edge(l.g, EdgeType::kStreamWait, from, to);
      a.stream_wait += ours != nullptr;
      if (ours != nullptr) a.matched.push_back(ours);
    } else {
      ours = find_edge(l.g, EdgeType::kSync, from, to);
      if (ours != nullptr) {
        ++a.sync;
        a.matched.push_back(ours);
      } else if (end_ns(l.trace, s) <= l.trace.events.ts_ns[d]) {
        // Context Sync (and HTA's Event Sync for cudaEventQuery) draws an
        // edge from the last kernel of every stream; the call did not wait
        // for one that was done before it began. We draw none.
        ++a.not_waited;
        continue;
      }
    }
    if (ours == nullptr) {
      ++a.missing;
      ADD_FAILURE() << "HTA edge " << h.kind << " " << h.src << (h.src_start ? ".start" : ".end") << " -> " << h.dst
                    << (h.dst_start ? ".start" : ".end") << " (" << h.src_name << " -> " << h.dst_name
                    << ") has no counterpart";
    }
  }
  return a;
}

// Our sync and stream-wait edges.
std::vector<const CausalEdge*> our_waits(const CausalGraph& g) {
  std::vector<const CausalEdge*> out;
  for (const CausalEdge& c : g.edges)
    if (c.type == EdgeType::kSync || c.type == EdgeType::kStreamWait) out.push_back(&c);
  return out;
}

bool on_path(const CriticalPath& p, const CausalEdge* e, const CausalGraph& g) {
  if (e == nullptr) return false;
  for (const PathSegment& s : p.segments)
    if (&g.edges[s.edge] == e) return true;
  return false;
}

std::int64_t us(const CriticalPath& p, BoundType b) { return p.bound_ns[static_cast<int>(b)] / 1000; }

// Path time on edges of one type, µs.
std::int64_t us_of(const CriticalPath& p, EdgeType t) {
  std::int64_t ns = 0;
  for (const PathSegment& s : p.segments)
    if (s.type == t) ns += s.dur_ns;
  return ns / 1000;
}

// Prints HTA's breakdown and ours side by side; returns our largest bound.
BoundType print_shares(const char* name, const HtaSummary& h, const CriticalPath& p) {
  const std::int64_t ht = h.total_us(), ot = p.length_ns() / 1000;
  std::printf("%s: critical path bound types, HTA (sum of edge weights %lld us) vs tprof (wall time %lld us)\n",
              name, static_cast<long long>(ht), static_cast<long long>(ot));
  struct Row {
    const char* name;
    std::int64_t hta;
    BoundType ours;
  };
  const Row rows[] = {{"cpu_bound", h.cpu_us, BoundType::kCpu},
                      {"gpu_compute_bound", h.gpu_compute_us, BoundType::kGpuCompute},
                      {"kernel_kernel_overhead", h.kernel_kernel_us, BoundType::kKernelKernelOverhead},
                      {"kernel_launch_overhead", h.launch_us, BoundType::kKernelLaunchOverhead}};
  BoundType best = BoundType::kCpu;
  for (const Row& r : rows) {
    const std::int64_t o = us(p, r.ours);
    std::printf("  %-24s HTA %7lld us %7.3f%%   tprof %7lld us %7.3f%%\n", r.name, static_cast<long long>(r.hta),
                100.0 * static_cast<double>(r.hta) / static_cast<double>(ht), static_cast<long long>(o),
                100.0 * static_cast<double>(o) / static_cast<double>(ot));
    if (p.bound_ns[static_cast<int>(r.ours)] > p.bound_ns[static_cast<int>(best)]) best = r.ours;
  }
  std::printf("  tprof's cpu_bound includes %lld us of host_gap (between recorded events); tprof's\n"
              "  kernel_kernel_overhead: stream %lld us, stream_wait %lld us, sync %lld us\n",
              static_cast<long long>(us_of(p, EdgeType::kHostGap)), static_cast<long long>(us_of(p, EdgeType::kStream)),
              static_cast<long long>(us_of(p, EdgeType::kStreamWait)),
              static_cast<long long>(us_of(p, EdgeType::kSync)));
  return best;
}

// HTA's cuda_event_sync test: ProfilerStep#100 of a trace with
// cudaStreamSynchronize, cudaEventSynchronize, cudaEventQuery and
// cudaDeviceSynchronize after one spin kernel.
TEST(CausalHta, EventSyncEdges) {
  const Loaded l = load(kEventSync);
  const Agreement a = compare(l, kEventSyncEdges);
  EXPECT_EQ(a.missing, 0);
  // Nothing is dropped or merged in this trace: HTA's ids are our indices.
  EXPECT_EQ(a.same_index, 2 * static_cast<int>(std::size(kEventSyncEdges)));
  EXPECT_EQ(a.launch, 5);
  // HTA's test asserts 33.end → 41.end (cudaEventSynchronize) and
  // 33.end → 51.end (cudaDeviceSynchronize). The spin kernel ran from
  // 512372 to 512408 µs: cudaEventSynchronize (512382–512416) waited for it,
  // cudaDeviceSynchronize began at 512474, when it was long done.
  const std::uint32_t spin = find_event(l.trace, "at::cuda::(anonymous namespace)::spin_kernel", 1707417525512372);
  const std::uint32_t event_sync = find_event(l.trace, "cudaEventSynchronize", 1707417525512382);
  const std::uint32_t device_sync = find_event(l.trace, "cudaDeviceSynchronize", 1707417525512474);
  const CausalEdge* e41 = find_edge(l.g, EdgeType::kSync, node_of(l.g, spin, false), node_of(l.g, event_sync, false));
  ASSERT_NE(e41, nullptr);
  EXPECT_EQ(e41->measured_ns, 8000);  // the call returned 8 µs after the kernel ended
  EXPECT_EQ(e41->cause_event, spin);
  EXPECT_EQ(find_edge(l.g, EdgeType::kSync, node_of(l.g, spin, false), node_of(l.g, device_sync, false)), nullptr);
  // One of HTA's four sync edges; the other three (into cudaStreamSynchronize,
  // cudaEventQuery and cudaDeviceSynchronize) are from work already done.
  EXPECT_EQ(a.sync, 1);
  EXPECT_EQ(a.not_waited, 3);
  // And one sync edge HTA lacks: the read-back cudaMemcpyAsync to pageable
  // memory (512252-512281) returns only once its copy (512270-512272) is
  // done (CUDA's API synchronization behavior); HTA weighs the call as CPU.
  const auto ours = our_waits(l.g);
  EXPECT_EQ(ours.size(), a.matched.size() + 1);
  const std::uint32_t readback = find_event(l.trace, "cudaMemcpyAsync", 1707417525512252);
  const std::uint32_t copy = find_event(l.trace, "Memcpy DtoH (Device -> Pageable)", 1707417525512270);
  const CausalEdge* back = find_edge(l.g, EdgeType::kSync, node_of(l.g, copy, false), node_of(l.g, readback, false));
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->measured_ns, 9000);
  EXPECT_EQ(std::count(a.matched.begin(), a.matched.end(), back), 0);
}

TEST(CausalHta, EventSyncPath) {
  const Loaded l = load(kEventSync);
  auto r = analyze_causal(l.trace, {.window_path = true});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->steps.size(), 1u);
  const StepTime& st = r->steps[0];
  EXPECT_EQ(st.step, 100);
  // The step's path is the path of its ProfilerStep#100 window (the one
  // step: from its begin to its end or its device work's).
  const CausalGraph& g = *r->graph;
  auto window = annotation_critical_path(l.trace, *r, "ProfilerStep#100", 0);
  ASSERT_TRUE(window.has_value());
  const CriticalPath& mine = *window;
  EXPECT_EQ(mine.bound_ns, st.path.bound_ns);
  EXPECT_EQ(mine.segments.size(), st.path.segments.size());
  // HTA's path runs cudaLaunchKernel → spin kernel (launch delay 10 µs) →
  // the kernel (36 µs) → sync → cudaEventSynchronize; so does ours.
  const std::uint32_t spin = find_event(l.trace, "at::cuda::(anonymous namespace)::spin_kernel", 1707417525512372);
  const std::uint32_t launch = find_event(l.trace, "cudaLaunchKernel", 1707417525512362);
  const std::uint32_t event_sync = find_event(l.trace, "cudaEventSynchronize", 1707417525512382);
  // (Our launch edge starts at the call's end: the kernel started after it returned.)
  EXPECT_TRUE(on_path(st.path, find_edge(g, EdgeType::kLaunch, node_of(g, launch, false), node_of(g, spin, true)), g));
  EXPECT_TRUE(on_path(st.path, find_edge(g, EdgeType::kDevice, node_of(g, spin, true), node_of(g, spin, false)), g));
  EXPECT_TRUE(
      on_path(st.path, find_edge(g, EdgeType::kSync, node_of(g, spin, false), node_of(g, event_sync, false)), g));
  // HTA's GPU time and launch delay, and one call more; HTA's path length (2411 µs) is
  // a sum of weights that leaves out the idle gaps between top-level ops
  // and the step's own begin and end, ours is the step's wall time (3154).
  // The read-back cudaMemcpyAsync to pageable memory, 29 µs of CPU in HTA,
  // is on our path as what it waited for: 18 µs until its copy started
  // (launch), the 2 µs copy and 9 µs from the copy's end to its return
  // (sync; EventSyncEdges).
  EXPECT_EQ(us(st.path, BoundType::kGpuCompute), kEventSyncSummary.gpu_compute_us + 2);
  EXPECT_EQ(us(st.path, BoundType::kKernelLaunchOverhead), kEventSyncSummary.launch_us + 18);
  EXPECT_EQ(st.path.length_ns(), 3154000);
  // The 8 µs from the kernel's end to cudaEventSynchronize's return and the
  // read-back's 9: HTA's sync edges weigh 0.
  EXPECT_EQ(us(st.path, BoundType::kKernelKernelOverhead), 8 + 9);
  // Our host time is HTA's plus what HTA weighs 0 or leaves off: 95 µs of
  // gaps between top-level ops and 9 µs of cudaStreamSynchronize and
  // cudaEventQuery (blocking calls' spans weigh 0 in HTA), 570 µs from the
  // step's begin to aten::ones and 61 µs from cudaEventElapsedTime to the
  // step's end (HTA gives the ProfilerStep annotation no nodes), less the
  // read-back's 29 µs (above).
  EXPECT_EQ(us(st.path, BoundType::kCpu), kEventSyncSummary.cpu_us + 95 + 9 + 570 + 61 - 29);
  EXPECT_EQ(print_shares("cuda_event_sync ProfilerStep#100", kEventSyncSummary, st.path), BoundType::kCpu);
}

// HTA's multi-stream test: two sgemms on streams 20 and 28, a
// cudaStreamWaitEvent that makes stream 24 wait for stream 20, queries and
// a final cudaDeviceSynchronize. Whole trace, no steps.
TEST(CausalHta, MultiStreamEdges) {
  const Loaded l = load(kMultiStream);
  const Agreement a = compare(l, kMultiStreamEdges);
  EXPECT_EQ(a.missing, 0);
  EXPECT_EQ(a.same_index, 2 * static_cast<int>(std::size(kMultiStreamEdges)));
  EXPECT_EQ(a.launch, 6);  // three of them zero-weight in HTA (its queue was not empty)
  EXPECT_EQ(a.kernel_kernel, 2);
  // HTA's test asserts 24.end → 84.start: the cudaEventRecord with
  // correlation 1385 recorded stream 20 after launch 27 (sgemm 24), and
  // cudaStreamWaitEvent (1389) made the next launch on stream 24, the
  // memset of cudaMemsetAsync 1411 (84), wait for it.
  const std::uint32_t sgemm = find_event(l.trace, "ampere_sgemm_128x64_nn", 1712867402348700);
  const std::uint32_t memset = find_event(l.trace, "Memset (Device)", 1712867402368034);
  const CausalEdge* wait =
      find_edge(l.g, EdgeType::kStreamWait, node_of(l.g, sgemm, false), node_of(l.g, memset, true));
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->cause_event, sgemm);
  EXPECT_EQ(l.trace.events.correlation[wait->cause_event], 27);
  EXPECT_EQ(l.trace.events.correlation[memset], 1411);
  EXPECT_FALSE(wait->binding);  // the memset's launch (cudaMemsetAsync 1411) came 19 ms later
  EXPECT_EQ(a.stream_wait, 1);
  // The final cudaDeviceSynchronize waited for sgemm 90 (stream 24); HTA
  // also draws its Context Sync edges from sgemm 24 and 54, done 19 ms
  // earlier, and its cudaEventQuery edges 24 → 46 and 54 → 82, both queries
  // made after the kernel ended.
  EXPECT_EQ(a.sync, 1);
  EXPECT_EQ(a.not_waited, 4);
  EXPECT_EQ(our_waits(l.g).size(), a.matched.size());
}

TEST(CausalHta, MultiStreamPath) {
  const Loaded l = load(kMultiStream);
  auto r = analyze_causal(l.trace, {.window_path = true});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->steps.size(), 1u);
  const CriticalPath& p = r->window;
  EXPECT_EQ(p.bound_ns, r->steps[0].path.bound_ns);
  // From aten::matmul's start (as HTA's) to cudaDeviceSynchronize's end,
  // 13 µs after sgemm 90 (HTA's path ends at the kernel: 19917 µs).
  EXPECT_EQ(p.length_ns(), 19930000);
  EXPECT_EQ(p.unexplained_ns, 0);
  // HTA: cudaMemsetAsync → memset 84 (launch 14 µs) → 1 µs → kernel-kernel
  // 15 µs → sgemm 90 (123 µs). Ours: cudaLaunchKernel → sgemm 90 (launch
  // 15 µs; the memset ended as the launch call began, and a launch wins that
  // tie) → 123 µs → its sync return, 13 µs. Same GPU work but the memset.
  EXPECT_EQ(us(p, BoundType::kGpuCompute), 123);
  EXPECT_EQ(us(p, BoundType::kKernelLaunchOverhead), 15);
  EXPECT_EQ(us(p, BoundType::kKernelKernelOverhead), 13);
  // HTA's four dependency edges between top-level ops (84, 18558, 10 and
  // 71 µs) weigh 0; ours are the host_gap edges, counted as host time. With
  // HTA's zero-weight cudaEventQuery spans (6 + 5 + 5 µs) and our 15 µs of
  // host work from cudaMemsetAsync to cudaLaunchKernel, the host time agrees.
  EXPECT_EQ(us_of(p, EdgeType::kHostGap), 84 + 18558 + 10 + 71);
  EXPECT_EQ(us(p, BoundType::kCpu), kMultiStreamSummary.cpu_us + 18723 + 16 + 15);
  EXPECT_EQ(print_shares("cuda_event_sync_multi_stream (whole trace)", kMultiStreamSummary, p), BoundType::kCpu);
}

// HTA's alexnet test: the second "[param|pytorch.model.alex_net|...forward]"
// annotation, with cudaStreamWaitEvent between streams 7 and 20.
TEST(CausalHta, AlexnetWindowEdges) {
  const Loaded l = load(kAlexnet);
  const Agreement a = compare(l, kAlexnetWindowEdges);
  EXPECT_EQ(a.missing, 0);
  EXPECT_EQ(a.same_index, 2 * static_cast<int>(std::size(kAlexnetWindowEdges)));
  EXPECT_EQ(a.launch, 40);
  EXPECT_EQ(a.kernel_kernel, 34);
  // HTA's test asserts the GPU→GPU edge 1109.end → 1161.start (fft2d_c2r on
  // stream 20 → elementwise add on stream 7), on its path.
  const std::uint32_t c2r = find_event(l.trace, "void fft2d_c2r_32x32<float, false, false, 0u", 1695835585860487);
  const std::uint32_t add = find_event(l.trace, "void at::native::elementwise_kernel<128, 2", 1695835585860634);
  const CausalEdge* wait = find_edge(l.g, EdgeType::kStreamWait, node_of(l.g, c2r, false), node_of(l.g, add, true));
  ASSERT_NE(wait, nullptr);
  EXPECT_TRUE(wait->binding);  // the add started 1 µs after the c2r ended
  EXPECT_EQ(wait->measured_ns, 1000);
  EXPECT_EQ(a.stream_wait, 3);
  // cudaDeviceSynchronize 1341 waited for 1335 (stream 7); HTA's edge from
  // 1109, stream 20's last kernel, ended 2.3 ms before the call began.
  EXPECT_EQ(a.sync, 1);
  EXPECT_EQ(a.not_waited, 1);
}

TEST(CausalHta, AlexnetWholeTraceSyncEdges) {
  const Loaded l = load(kAlexnet);
  const Agreement a = compare(l, kAlexnetWholeSyncEdges);
  EXPECT_EQ(a.missing, 0);
  // 16 cudaStreamSynchronize after pageable HtoD copies and one
  // cudaDeviceSynchronize, 6 cudaStreamWaitEvent: the same as HTA's; 8 of
  // HTA's Context Sync edges are from kernels done before the call began.
  EXPECT_EQ(a.sync, 17);
  EXPECT_EQ(a.stream_wait, 6);
  EXPECT_EQ(a.not_waited, 8);
  // Every sync and stream-wait edge of ours is one of HTA's.
  EXPECT_EQ(our_waits(l.g).size(), a.matched.size());
}

TEST(CausalHta, AlexnetWindowPath) {
  const Loaded l = load(kAlexnet);
  auto r = analyze_causal(l.trace, {.window_path = true});
  ASSERT_TRUE(r.has_value());
  const CausalGraph& g = *r->graph;
  const std::uint32_t ann =
      find_event(l.trace, "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1695835585827782);
  ASSERT_NE(g.activity_of_event[ann], kNoIndex);
  // The second of the two "measure" forward annotations (by start).
  auto window = annotation_critical_path(l.trace, *r, "[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1);
  ASSERT_TRUE(window.has_value());
  const CriticalPath& p = *window;
  ASSERT_EQ(p.start_ns, l.trace.events.ts_ns[ann]);
  EXPECT_EQ(p.length_ns(), 36356000);  // the annotation's wall time
  // HTA's path goes through the stream-wait edge 1109 → 1161; ours too.
  const std::uint32_t c2r = find_event(l.trace, "void fft2d_c2r_32x32<float, false, false, 0u", 1695835585860487);
  const std::uint32_t add = find_event(l.trace, "void at::native::elementwise_kernel<128, 2", 1695835585860634);
  EXPECT_TRUE(on_path(p, find_edge(g, EdgeType::kStreamWait, node_of(g, c2r, false), node_of(g, add, true)), g));
  EXPECT_EQ(print_shares("alexnet forward (HTA's instance 1)", kAlexnetSummary, p), BoundType::kCpu);
  // The device side of the two paths is the same: 3712 µs of kernels, one
  // launch delay of 30 µs (cudaLaunchKernel 1091 → fft2d_r2c 1089) and
  // 50 µs of gaps between kernels on a stream. HTA's sync edges weigh 0:
  // ours add the 1 µs from c2r's end to the add's start and the 8 µs from
  // kernel 1335's end to cudaDeviceSynchronize's return.
  EXPECT_EQ(us(p, BoundType::kGpuCompute), kAlexnetSummary.gpu_compute_us);
  EXPECT_EQ(us(p, BoundType::kKernelLaunchOverhead), kAlexnetSummary.launch_us);
  EXPECT_EQ(us_of(p, EdgeType::kStream), kAlexnetSummary.kernel_kernel_us);
  EXPECT_EQ(us_of(p, EdgeType::kStreamWait), 1);
  EXPECT_EQ(us_of(p, EdgeType::kSync), 8);
  // Host time: HTA's plus the 14 µs of the blocking cudaDeviceSynchronize
  // 1007 and 176 µs of gaps between top-level ops (both weigh 0 in HTA),
  // 50 µs from the annotation's begin to that call (HTA's path starts
  // there: annotations get no nodes) and 273 µs from cudaDeviceSynchronize
  // 1341's return to the annotation's end.
  EXPECT_EQ(us(p, BoundType::kCpu), kAlexnetSummary.cpu_us + 14 + 176 + 50 + 273);
}

}  // namespace
}  // namespace tprof
