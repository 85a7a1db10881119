"""SASS instructions per loop of the fused kernel bsp_wphi_rk (docs/performance-bte-kernels.md §11-12), or with
``--kernel dx`` of the x kernel bsp_weno_dx (§13: weno.py's x build, -DBSP_WENO_FAST=1 [+ -DBSP_WENO_FAST2=1];
its one loop = one node).

Compiles solver/bsp/kernels/cuda/weno.cu as rk.py's NVRTC call does (--fmad=false -DBSP_WENO_FAST=1
-DNPHI_ -DLROWS [+ -DBSP_WENO_FAST2=1 -DWPHI_BLOCK=256]) with ``nvcc -cubin -arch=sm_90``, disassembles it with
``nvdisasm`` (PyPI nvidia-cuda-nvdisasm) and, between the block barriers (BAR.SYNC), counts the
instructions of each loop body (from the target of a backward branch to the branch), classified:
FP64 = D* arithmetic / compare and MUFU.*64*; uniform = U* (moves of constants and addresses);
shared = LDS/STS; spill = LDL/STL.  The division's slow path (a CALL out of the loop) is not counted.

    python tools/bsp/sass_count.py [--nphi 48] [--rows 16] [--variants fast fast2]
    python tools/bsp/sass_count.py --kernel dx [--variants fast fast2]
    python tools/bsp/sass_count.py --kernel dx_tile [--xseg 65] [--xwarps 8] [--mesh 65,6,300,48]
                                   [--extra='-DXMINB=6 -DXFPT=1 -DXROWS_GENERIC']
                                   (the tile x kernel bsp_weno_dx_tile, fast2 only, §19-20: loops load / face / difference;
                                   --mesh NX,NS,NW,NPHI: its compile-time sizes, §20)
    python tools/bsp/sass_count.py [--kernel dx] --variants fast2 fast3      (fast3 = fast2 with --fmad=true, §16)
    python tools/bsp/sass_count.py --kernel gain|loss|overlap|rho|rk_dens --variants fast fastc
                                   (fast = their build, --fmad=false; fastc = the same with --fmad=true)
    WENO_CU=/path/to/prototype.cu python tools/bsp/sass_count.py ...   (count another copy of weno.cu)
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.environ.get("WENO_CU", os.path.join(ROOT, "solver", "bsp", "kernels", "cuda", "weno.cu"))
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
LOOPS = ("load", "w faces", "phi faces", "RK update", "PhiHat sum")
# the other BTE kernels (§14-16), built as their launchers build them for the standard mesh (N_sbn = 6, 19
# branches per valley: MAXE = 114; NW = 300: LPT = 2, 160 threads; NPHI = 48: LINES = 32)
OTHER = {
    "bsp_scat_gain": ("scattering.cu", {"MAXE": 114, "NS_": 6, "LPT": 2, "NWS": 320}),
    "bsp_scat_loss": ("scattering.cu", {"MAXE": 114, "NS_": 6, "LPT": 2, "NWS": 320}),
    "bsp_overlap": ("scattering.cu", {"OVL_TILE": 6144}),
    "bsp_rho": ("rk.cu", {"NPHI_": 48, "LINES": 32}),
    "bsp_rk_dens": ("rk.cu", {"NPHI_": 48, "LINES": 32}),
}


def nvdisasm() -> str:
    for c in ["nvdisasm"] + sorted(glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages",
                                                          "nvidia", "*", "bin", "nvdisasm"))):
        try:
            subprocess.run([c, "--version"], capture_output=True, check=True)
            return c
        except (OSError, subprocess.CalledProcessError):
            continue
    raise SystemExit("nvdisasm not found (pip install nvidia-cuda-nvdisasm)")


def sass(variant: str, nphi: int, rows: int, tmp: str, kernel: str = "bsp_wphi_rk", xseg: int = 65, xwarps: int = 8,
         extra: tuple = (), mesh: tuple = (65, 6, 300, 48)) -> tuple[list, str]:
    cubin = os.path.join(tmp, f"{variant}.cubin")
    if kernel == "bsp_weno_dx_tile":  # weno.py's tile build of the x kernel (fast2 only; §19)
        nx, ns, nw, nphi = mesh
        cmd = ["nvcc", "-cubin", "-arch=sm_90", "--fmad=false", "-DBSP_WENO_FAST=1", "-DBSP_WENO_FAST2=1",
               f"-DXSEG_={xseg}", f"-DXWARPS={xwarps}", f"-DXNX={nx}", f"-DXNS={ns}", f"-DXNW={nw}", f"-DXNPHI={nphi}",
               "--resource-usage", "-o", cubin, SRC]
    elif kernel == "bsp_wphi_rk":
        cmd = ["nvcc", "-cubin", "-arch=sm_90", "--fmad=false", "-DBSP_WENO_FAST=1", f"-DNPHI_={nphi}",
               f"-DLROWS={rows}", "--resource-usage", "-o", cubin, SRC]
        if variant in ("fast2", "fast3"):
            cmd[4:4] = ["-DBSP_WENO_FAST2=1", "-DWPHI_BLOCK=256"]
    elif kernel in OTHER:  # scattering.py's / rk.py's builds (standard mesh defines; no fast / fast2 switch)
        src, defs = OTHER[kernel]
        cmd = ["nvcc", "-cubin", "-arch=sm_90", "--fmad=false", *[f"-D{k}={v}" for k, v in defs.items()],
               "--resource-usage", "-o", cubin, os.path.join(ROOT, "solver", "bsp", "kernels", "cuda", src)]
    else:  # weno.py's build of the x kernel (no NPHI_ / LINES / LROWS)
        cmd = ["nvcc", "-cubin", "-arch=sm_90", "--fmad=false", "-DBSP_WENO_FAST=1", "--resource-usage", "-o", cubin, SRC]
        if variant in ("fast2", "fast3"):
            cmd[4:4] = ["-DBSP_WENO_FAST2=1"]
    cmd[-3:-3] = list(extra)
    if variant in ("fast3", "fastc"):  # fast2 / fast with FMA contraction (numerics.bte_kernels: fast3, §16)
        cmd[cmd.index("--fmad=false")] = "--fmad=true"
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    lines = (r.stdout + r.stderr).splitlines()
    usage = " ".join(x.strip() for i, x in enumerate(lines) if kernel in x or (
        ("spill" in x or "registers" in x) and any(kernel in y for y in lines[max(0, i - 3):i])))
    text = subprocess.run([nvdisasm(), "-c", cubin], capture_output=True, text=True, check=True).stdout
    text = text.split(f".text.{kernel}:", 1)[1].split("//----", 1)[0]
    ins, labels, pending = [], {}, []
    for line in text.splitlines():
        lab = re.match(r"\s*(\.L_x_\d+):", line)
        if lab:
            pending.append(lab.group(1))
            continue
        m = LINE.search(line)
        if m:
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            ins.append((addr, m.group(2).strip()))
    ins = [(a, op, labels.get(b.group(1)) if (b := re.search(r"BRA\s+`\((\.L_x_\d+)\)", op)) else None)
           for a, op in ins]
    return ins, usage


def classify(op: str) -> str:
    o = op.split()[0] if not op.startswith("@") else op.split()[1]
    if re.match(r"D(ADD|MUL|FMA|SETP|MNMX)", o) or (o.startswith("MUFU") and "64" in o):
        return "fp64"
    if o.startswith("U"):
        return "uniform"
    if o.startswith(("LDS", "STS")):
        return "shared"
    if o.startswith(("LDL", "STL")):
        return "spill"
    return "other"


def loops(ins):
    """Per segment between barriers: the largest backward-branch range (the loop body) and its counts."""
    bars = [i for i, (_, op, _) in enumerate(ins) if "BAR.SYNC" in op]
    bounds = [0] + bars + [len(ins)]
    out = []
    for k in range(len(bounds) - 1):
        seg = ins[bounds[k]:bounds[k + 1]]
        best = None
        for addr, op, target in seg:
            if target is not None and target <= addr:
                body = [x for x in seg if target <= x[0] <= addr]
                if best is None or len(body) > len(best):
                    best = body
        counts = {"total": 0, "fp64": 0, "uniform": 0, "shared": 0, "spill": 0, "other": 0}
        for _, op, _ in best or []:
            counts["total"] += 1
            counts[classify(op)] += 1
        counts["segment"] = len(seg)  # every instruction between the two barriers (straight-line code: executed once)
        out.append(counts)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nphi", type=int, default=48)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--variants", nargs="+", default=["fast", "fast2"])
    ap.add_argument("--kernel", choices=["wphi", "dx", "dx_tile", "gain", "loss", "overlap", "rho", "rk_dens"],
                    default="wphi")
    ap.add_argument("--xseg", type=int, default=65, help="dx_tile: x nodes per block (-DXSEG_)")
    ap.add_argument("--xwarps", type=int, default=8, help="dx_tile: warps per block (-DXWARPS)")
    ap.add_argument("--mesh", default="65,6,300,48", help="dx_tile: NX,NS,NW,NPHI (-DXNX -DXNS -DXNW -DXNPHI, §20); "
                    "fine 129,6,600,96 (with --xseg 65)")
    ap.add_argument("--extra", default="", help="more nvcc options, one string (e.g. --extra='-DXMINB=6 -DXFPT=1')")
    a = ap.parse_args()
    if a.kernel == "dx_tile":
        a.variants = [v for v in a.variants if v in ("fast2", "fast3")] or ["fast2"]
    kernel = {"wphi": "bsp_wphi_rk", "dx": "bsp_weno_dx", "dx_tile": "bsp_weno_dx_tile"}.get(a.kernel, "bsp_" + a.kernel.replace("gain", "scat_gain")
                                                              .replace("loss", "scat_loss"))
    with tempfile.TemporaryDirectory() as tmp:
        for v in a.variants:
            ins, usage = sass(v, a.nphi, a.rows, tmp, kernel, a.xseg, a.xwarps, tuple(a.extra.split()),
                              tuple(int(x) for x in a.mesh.split(",")))
            where = {"wphi": f"NPHI={a.nphi} LROWS={a.rows}", "dx": "x build",
                     "dx_tile": f"mesh {a.mesh} XSEG_={a.xseg} XWARPS={a.xwarps} {a.extra}".strip()}.get(
                a.kernel, "standard build")
            fp = sum(classify(op) == "fp64" for _, op, _ in ins)
            print(f"## {v} {kernel}: {where}: {len(ins)} SASS instructions in the kernel (FP64 {fp}); {usage}")
            names = {"wphi": LOOPS, "dx": ("node",), "dx_tile": ("load", "face", "difference")}.get(a.kernel, tuple(f"segment {k}" for k in range(8)))
            for name, c in zip(names, loops(ins)):
                print(f"  {name:10s} loop body: {c['total']:4d} (FP64 {c['fp64']}, uniform {c['uniform']}, "
                      f"shared {c['shared']}, spill {c['spill']}, other {c['other']})"
                      + (f"; {c['segment']} in the phase" if a.kernel == "dx_tile" else ""))


if __name__ == "__main__":
    main()
