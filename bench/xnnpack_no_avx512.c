// Measuring aid: an LD_PRELOAD shim that makes XNNPACK (through libcpuinfo)
// see a CPU without AVX-512, so it picks its AVX2/FMA3 microkernels, as on
// the AVX2-only machines that also run the bench. With KILN_XNNPACK_ISA=avx2
// (the plugin's own kernels, backends/xnnpack/xnn_isa.h) a whole
// `--backends xnnpack` run then takes the AVX2 paths on an AVX-512 machine.
//
//   cc -O2 -shared -fPIC -o /tmp/xnnpack_no_avx512.so bench/xnnpack_no_avx512.c -ldl
//   LD_PRELOAD=/tmp/xnnpack_no_avx512.so KILN_XNNPACK_ISA=avx2 build/bin/kiln bench MODEL --backends xnnpack,portable
//
// The plugin dlopens libXNNPACK (RTLD_LOCAL), so libcpuinfo is looked up by
// name; XNNPACK's call to cpuinfo_initialize binds to this one (LD_PRELOAD
// comes first), which runs the real one and clears the AVX-512 flags in the
// library's cpuinfo_isa (the struct layout of the installed cpuinfo.h).
// ONNX Runtime (MLAS) detects the CPU itself and is not affected.
#define _GNU_SOURCE
#include <cpuinfo.h>
#include <dlfcn.h>

bool cpuinfo_initialize(void) {
  void* lib = dlopen("libcpuinfo.so.0", RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return false;
  bool (*real)(void) = (bool (*)(void))dlsym(lib, "cpuinfo_initialize");
  const bool ok = real && real();
  struct cpuinfo_x86_isa* isa = (struct cpuinfo_x86_isa*)dlsym(lib, "cpuinfo_isa");
  if (isa) {
    isa->avx512f = isa->avx512pf = isa->avx512er = isa->avx512cd = isa->avx512dq = isa->avx512bw = false;
    isa->avx512vl = isa->avx512ifma = isa->avx512vbmi = isa->avx512vbmi2 = isa->avx512bitalg = false;
    isa->avx512vpopcntdq = isa->avx512vnni = isa->avx512bf16 = isa->avx512vp2intersect = false;
    isa->avx512_4vnniw = isa->avx512_4fmaps = false;
  }
  return ok;
}
