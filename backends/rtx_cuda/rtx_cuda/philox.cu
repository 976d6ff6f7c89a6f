// Counter-based random numbers for rtx_cuda: Philox4x32-10 keyed by the seed,
// one counter per element (offset + i), so the numbers don't depend on the
// launch shape and rtxcore.manual_seed fixes every later draw. CuPy compiles
// this with NVRTC at first use; tests compile it with nvcc for sm_80 and sm_90.

__device__ __forceinline__ uint4 philox(unsigned long long ctr, unsigned long long key)
{
    uint4 c = make_uint4((unsigned)ctr, (unsigned)(ctr >> 32), 0u, 0u);
    unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);
    for (int r = 0; r < 10; r++) {
        unsigned hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        unsigned hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

// uniform in [0, 1), exactly representable: 24 bits for float, 11 for half
// (drawn as float, then cast: every value is a half), 53 for double
__device__ __forceinline__ float unit_f32(uint4 r) { return (float)(r.x >> 8) * 0x1.0p-24f; }
__device__ __forceinline__ float unit_f16(uint4 r) { return (float)(r.x >> 21) * 0x1.0p-11f; }
__device__ __forceinline__ double unit_f64(uint4 r)
{
    return ((double)(r.x >> 5) * 67108864.0 + (double)(r.y >> 6)) * 0x1.0p-53;
}

#define ELEMENT long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; \
                if (i >= n) return; uint4 r = philox(ctr + i, key);

// uniform_f32, uniform_f16 (drawn as float: the host casts), uniform_f64:
// out[i] = low + unit * span
#define RTX_UNIFORM(NAME, T, UNIT) \
extern "C" __global__ void NAME(T* out, long long n, T low, T span, \
                                unsigned long long key, unsigned long long ctr) \
{ \
    ELEMENT \
    out[i] = low + UNIT(r) * span; \
}
RTX_UNIFORM(uniform_f32, float, unit_f32)
RTX_UNIFORM(uniform_f16, float, unit_f16)
RTX_UNIFORM(uniform_f64, double, unit_f64)

// standard normal by Box-Muller; u1 in (0, 1] so the log is finite
extern "C" __global__ void normal_f32(float* out, long long n, float mean, float std,
                                      unsigned long long key, unsigned long long ctr)
{
    ELEMENT
    float u1 = ((float)(r.x >> 8) + 1.0f) * 0x1.0p-24f;
    float u2 = (float)(r.y >> 8) * 0x1.0p-24f;
    out[i] = mean + std * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

extern "C" __global__ void normal_f64(double* out, long long n, double mean, double std,
                                      unsigned long long key, unsigned long long ctr)
{
    ELEMENT
    double u1 = ((double)(r.x >> 5) * 67108864.0 + (double)(r.y >> 6) + 1.0) * 0x1.0p-53;
    double u2 = ((double)(r.z >> 5) * 67108864.0 + (double)(r.w >> 6)) * 0x1.0p-53;
    out[i] = mean + std * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
}
