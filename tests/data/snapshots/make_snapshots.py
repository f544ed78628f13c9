#!/usr/bin/env python3
"""Writes the synthetic PyTorch memory snapshots of this folder.

No GPU made these: a small model of torch's CUDA caching allocator runs a
training loop and writes what torch.cuda.memory._snapshot() would return
for it, in the shapes torch's own sources give (torch/cuda/memory.py
_snapshot's docstring, torch/csrc/cuda/Module.cpp and memory_snapshot.cpp,
c10/cuda/CUDACachingAllocator.cpp):

  train_2x_p4.pickle       torch >= 2.1: {"segments", "device_traces"}; blocks with
                           address/requested_size/frames; trace entries with time_us;
                           pickle.dump's default protocol 4, as _dump_snapshot writes it.
  train_2x_p2.pickle       the same snapshot at protocol 2.
  train_2x_cpp.pickle      the same snapshot as torch's C++ JIT pickler writes it
                           (torch::cuda::_memory_snapshot_pickled): protocol 2,
                           memoized strings, 8-byte LONG1, containers memoized after.
  ring_2devices_p2.pickle  two devices, C++ frames in the stacks (stacks="all"), a trace
                           ring that dropped its oldest entries, empty_cache() at the end.
  torch20_notime_p4.pickle torch 2.0: blocks with history [{addr, real_size, frames}],
                           trace entries without time_us.
  torch113_p4.pickle       torch 1.13: the list of segments alone (1.13's _snapshot()),
  torch113_p2.pickle       pickled by the user at protocols 4 and 2.

The training loop (8 steps) plants a leak (train.py:61 keeps 256 KiB a step
in a list) and a spike (step 4 takes a 64 MiB scratch buffer at train.py:66
and gives it back). Everything is deterministic: running this again writes
the same bytes. Real snapshots recorded on a GPU should replace these
(tests/data/PROVENANCE.md).

Usage: python3 make_snapshots.py [OUT_DIR]   (default: this script's folder)
"""

import io
import os
import pickle
import struct
import sys

KIB = 1024
MIB = 1024 * 1024


def round_size(n):
    # CUDACachingAllocator::round_size: multiples of 512 bytes (kMinBlockSize).
    return max(512, (n + 511) // 512 * 512)


class Frames:
    """Frame dicts shared by value, as torch's symbolizer shares them."""

    def __init__(self):
        self.cache = {}

    def frame(self, filename, line, name):
        key = (filename, line, name)
        if key not in self.cache:
            self.cache[key] = {"filename": filename, "line": line, "name": name}
        return self.cache[key]

    def stack(self, *entries):
        return [self.frame(*e) for e in entries]


TORCH = "/usr/lib/python3/dist-packages/torch"
PROJ = "/home/user/proj"


class Block:
    def __init__(self, offset, size):
        self.offset = offset
        self.size = size
        self.state = "inactive"
        self.requested = 0
        self.frames = []
        self.history = []  # 1.13 / 2.0: [{addr, real_size, frames}], newest first


class Segment:
    def __init__(self, address, size, kind):
        self.address = address
        self.size = size
        self.kind = kind  # "small" or "large"
        self.blocks = [Block(0, size)]


class Allocator:
    """Enough of CUDACachingAllocator for snapshots whose numbers add up."""

    def __init__(self, device, base_address, t0_us, timed=True):
        self.device = device
        self.next_address = base_address
        self.segments = []
        self.trace = []
        self.time_us = t0_us
        self.timed = timed
        self.live = {}  # addr -> (segment, block)

    def _record(self, action, addr, size, frames):
        self.time_us += 7
        entry = {"action": action, "addr": addr, "size": size, "stream": 0}
        if self.timed:
            entry["time_us"] = self.time_us
        entry["frames"] = frames
        self.trace.append(entry)

    def _new_segment(self, size, kind, frames):
        # Segments sit 2 MiB apart, like cudaMalloc's.
        seg = Segment(self.next_address, size, kind)
        self.next_address += (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)
        self.segments.append(seg)
        self._record("segment_alloc", seg.address, size, frames)
        return seg

    def malloc(self, requested, frames):
        size = round_size(requested)
        kind = "small" if size <= MIB else "large"
        best = None
        for seg in self.segments:
            if seg.kind != kind:
                continue
            for b in seg.blocks:
                if b.state == "inactive" and b.size >= size and (best is None or b.size < best[1].size):
                    best = (seg, b)
        if best is None:
            if kind == "small":
                seg_size = 2 * MIB
            elif size < 10 * MIB:
                seg_size = 20 * MIB
            else:
                seg_size = (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)
            seg = self._new_segment(seg_size, kind, frames)
            best = (seg, seg.blocks[0])
        seg, b = best
        remaining = b.size - size
        # should_split: small blocks split at 512 bytes left, large ones past 1 MiB.
        if (kind == "small" and remaining >= 512) or (kind == "large" and remaining > MIB):
            rest = Block(b.offset + size, remaining)
            b.size = size
            seg.blocks.insert(seg.blocks.index(b) + 1, rest)
        b.state = "active_allocated"
        b.requested = requested
        b.frames = frames
        addr = seg.address + b.offset
        b.history = [{"addr": addr, "real_size": requested, "frames": frames}] + b.history[:1]
        self.live[addr] = (seg, b)
        self._record("alloc", addr, requested, frames)
        return addr

    def free(self, addr, pending=False):
        seg, b = self.live.pop(addr)
        self._record("free_requested", addr, b.requested, b.frames)
        if pending:
            # Another stream still uses it: free_completed comes later.
            b.state = "active_pending_free"
            return
        self._complete(seg, b, addr)

    def _complete(self, seg, b, addr):
        self._record("free_completed", addr, b.requested, b.frames)
        b.state = "inactive"
        b.frames = []
        i = seg.blocks.index(b)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].state == "inactive":
            b.size += seg.blocks.pop(i + 1).size
        if i > 0 and seg.blocks[i - 1].state == "inactive":
            prev = seg.blocks[i - 1]
            prev.size += b.size
            prev.history = b.history + prev.history
            seg.blocks.pop(i)

    def empty_cache(self):
        for seg in list(self.segments):
            if len(seg.blocks) == 1 and seg.blocks[0].state == "inactive":
                self.segments.remove(seg)
                self._record("segment_free", seg.address, seg.size, [])

    def snapshot_segments(self, shape):
        out = []
        for seg in self.segments:
            blocks = []
            for b in seg.blocks:
                addr = seg.address + b.offset
                if shape == "2x":
                    blk = {"address": addr, "size": b.size, "requested_size": b.requested if b.state != "inactive" else 0,
                           "state": b.state, "frames": b.frames}
                elif shape == "20":
                    blk = {"size": b.size, "requested_size": b.requested if b.state != "inactive" else 0, "state": b.state}
                    if b.history:
                        blk["history"] = b.history
                else:  # 1.13
                    blk = {"size": b.size, "state": b.state}
                    if b.history:
                        blk["history"] = b.history
                blocks.append(blk)
            allocated = sum(b.size for b in seg.blocks if b.state == "active_allocated")
            active = sum(b.size for b in seg.blocks if b.state != "inactive")
            s = {"device": self.device, "address": seg.address, "total_size": seg.size,
                 "allocated_size": allocated, "active_size": active, "stream": 0,
                 "segment_type": seg.kind}
            if shape != "113":
                s["requested_size"] = sum(b.requested for b in seg.blocks if b.state != "inactive")
                s["segment_pool_id"] = (0, 0)
            if shape == "2x":
                s["is_expandable"] = False
                s["frames"] = []
            s["blocks"] = blocks
            out.append(s)
        return out


def user_stack(fr, cpp, *user):
    """A stack, innermost first: torch's own frames, then the user's."""
    inner = []
    if cpp:
        inner += [
            ("/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1152, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
            ("??", 0, "at::native::empty_cuda"),
            ("/opt/pytorch/aten/src/ATen/core/boxing/KernelFunction_impl.h", 50, "c10::KernelFunction::call"),
            ("/usr/src/python3.11/Python/ceval.c", 5200, "_PyEval_EvalFrameDefault"),
        ]
    inner += [(f"{TORCH}/nn/modules/linear.py", 114, "forward"), (f"{TORCH}/nn/modules/module.py", 1501, "_call_impl")]
    return fr.stack(*(inner + list(user)))


def train(alloc, fr, cpp, steps=8):
    main = [(f"{PROJ}/train.py", 90, "main"), (f"{PROJ}/train.py", 95, "<module>")]
    weights = [alloc.malloc(n, fr.stack((f"{PROJ}/model.py", 12, "__init__"), (f"{PROJ}/train.py", 40, "build"), *main))
               for n in (4 * MIB, 4 * MIB + 1000, 64 * KIB, 3000)]
    kept = []
    for step in range(steps):
        step_frames = [(f"{PROJ}/train.py", 52, "train_step"), *main]
        acts = [alloc.malloc(n, user_stack(fr, cpp, (f"{PROJ}/model.py", 31 + i, "forward"), *step_frames))
                for i, n in enumerate((2 * MIB, 2 * MIB, 512 * KIB, 12 * KIB + 17))]
        loss = alloc.malloc(4, fr.stack((f"{PROJ}/train.py", 55, "train_step"), *main))
        # Backward has no Python frames without stacks="all".
        grad_frames = fr.stack(("/opt/pytorch/torch/csrc/autograd/engine.cpp", 1200, "torch::autograd::Engine::thread_main")) if cpp else []
        grads = [alloc.malloc(n, grad_frames) for n in (4 * MIB, 4 * MIB + 1000, 64 * KIB, 3000)]
        for a in reversed(acts):
            alloc.free(a)
        opt = alloc.malloc(8 * MIB, fr.stack((f"{TORCH}/optim/adam.py", 400, "_single_tensor_adam"),
                                             (f"{PROJ}/train.py", 58, "train_step"), *main))
        alloc.free(opt)
        for g in grads:
            alloc.free(g)
        # The leak: the loss history keeps a GPU tensor per step.
        kept.append(alloc.malloc(256 * KIB, fr.stack((f"{PROJ}/train.py", 61, "train_step"), *main)))
        if step == 4:
            # The spike: a scratch buffer for a debug dump, given back at once.
            scratch = alloc.malloc(64 * MIB, fr.stack((f"{PROJ}/train.py", 66, "debug_dump"),
                                                      (f"{PROJ}/train.py", 52, "train_step"), *main))
            alloc.free(scratch)
        alloc.free(loss)
    return weights, kept


def snapshot_2x(ring=None, devices=1, cpp=False, empty_cache=False, shape="2x", timed=True):
    fr = Frames()
    traces, segments = [], []
    for d in range(devices):
        alloc = Allocator(d, 0x7F0000000000 + d * 0x10000000000, 1_700_000_000_000_000 + d * 13, timed=timed)
        weights, kept = train(alloc, fr, cpp)
        if d == 1:
            # Freed while another stream still reads it: awaiting free_completed.
            alloc.free(kept[0], pending=True)
        if empty_cache:
            alloc.empty_cache()
        trace = alloc.trace if ring is None else alloc.trace[-ring:]
        traces.append(trace)
        segments += alloc.snapshot_segments(shape)
    snap = {"segments": segments, "device_traces": traces}
    if shape == "2x":
        snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                      "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                      "roundup_power2_divisions": {"1": 0, "2": 0}}
    return snap


def snapshot_113():
    fr = Frames()
    alloc = Allocator(0, 0x7F0000000000, 0)
    train(alloc, fr, cpp=False, steps=3)
    return alloc.snapshot_segments("113")


class CppPickler:
    """torch's JIT pickler (torch/csrc/jit/serialization/pickler.cpp) at
    protocol 2, as _memory_snapshot_pickled uses it: no type tags, strings
    memoized by value, containers referenced more than once memoized (by
    identity) after they are written."""

    def __init__(self, root):
        self.out = io.BytesIO()
        self.memo_id = 0
        self.strings = {}
        self.objects = {}
        self.refs = {}
        self._count(root)

    def _count(self, root):
        todo = [root]
        while todo:
            v = todo.pop()
            if isinstance(v, (dict, list, tuple)):
                self.refs[id(v)] = self.refs.get(id(v), 0) + 1
                if self.refs[id(v)] > 1:
                    continue
                todo += list(v.keys()) + list(v.values()) if isinstance(v, dict) else list(v)

    def _put(self):
        if self.memo_id <= 255:
            self.out.write(b"q" + bytes([self.memo_id]))
        else:
            self.out.write(b"r" + struct.pack("<I", self.memo_id))
        self.memo_id += 1
        return self.memo_id - 1

    def _get(self, i):
        self.out.write(b"h" + bytes([i]) if i <= 255 else b"j" + struct.pack("<I", i))

    def _int(self, n):
        if 0 <= n <= 0xFF:
            self.out.write(b"K" + bytes([n]))
        elif 0 <= n <= 0xFFFF:
            self.out.write(b"M" + struct.pack("<H", n))
        elif -(2 ** 31) <= n < 2 ** 31:
            self.out.write(b"J" + struct.pack("<i", n))
        else:
            self.out.write(b"\x8a\x08" + struct.pack("<q", n))

    def push(self, v):
        if isinstance(v, (dict, list, tuple)) and self.refs.get(id(v), 0) > 1:
            if id(v) in self.objects:
                self._get(self.objects[id(v)])
                return
            self._push(v)
            self.objects[id(v)] = self._put()
            return
        self._push(v)

    def _push(self, v):
        w = self.out.write
        if v is None:
            w(b"N")
        elif v is True or v is False:
            w(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            self._int(v)
        elif isinstance(v, float):
            w(b"G" + struct.pack(">d", v))
        elif isinstance(v, str):
            if v in self.strings:
                self._get(self.strings[v])
            else:
                data = v.encode()
                w(b"X" + struct.pack("<I", len(data)) + data)
                self.strings[v] = self._put()
        elif isinstance(v, dict):
            w(b"}(")
            for k, x in v.items():
                self.push(k)
                self.push(x)
            w(b"u")
        elif isinstance(v, list):
            w(b"](")
            for x in v:
                self.push(x)
            w(b"e")
        elif isinstance(v, tuple):
            assert len(v) == 2
            self.push(v[0])
            self.push(v[1])
            w(b"\x86")
        else:
            raise TypeError(type(v))

    def dumps(self, root):
        self.out.write(b"\x80\x02")
        self.push(root)
        self.out.write(b".")
        return self.out.getvalue()


def write(out_dir, name, data):
    path = os.path.join(out_dir, name)
    with open(path, "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    snap = snapshot_2x()
    write(out_dir, "train_2x_p4.pickle", pickle.dumps(snap, protocol=4))
    write(out_dir, "train_2x_p2.pickle", pickle.dumps(snap, protocol=2))
    # A download cut short: tprof memory must name the byte where it ends.
    write(out_dir, "train_2x_p4.cut.pickle", pickle.dumps(snap, protocol=4)[:700])
    cpp = CppPickler(snap).dumps(snap)
    assert pickle.loads(cpp) == snap
    write(out_dir, "train_2x_cpp.pickle", cpp)
    write(out_dir, "ring_2devices_p2.pickle",
          pickle.dumps(snapshot_2x(ring=150, devices=2, cpp=True, empty_cache=True), protocol=2))
    write(out_dir, "torch20_notime_p4.pickle", pickle.dumps(snapshot_2x(shape="20", timed=False), protocol=4))
    segs = snapshot_113()
    write(out_dir, "torch113_p4.pickle", pickle.dumps(segs, protocol=4))
    write(out_dir, "torch113_p2.pickle", pickle.dumps(segs, protocol=2))


if __name__ == "__main__":
    main()
