// Floor division and remainder of floats as PyTorch (and Python) define them.
// CuPy computes floor(a / b) and a - floor(a / b) * b, which goes wrong next to
// multiples (1.0 // 0.1 is 10 where it should be 9, 1.0 % 0.1 is 0 where it
// should be 0.0999...) and at infinities (5 % inf is NaN where it should be 5).
// fmod is exact, so both start from it. float16 is computed in float32.

template <typename T>
__device__ __forceinline__ bool rtx_mod_fix(T b, T m) {
    return m != 0 && ((b < 0) != (m < 0));
}

template <typename T>
__device__ __forceinline__ T rtx_remainder(T a, T b) {
    T m = fmod(a, b);
    return rtx_mod_fix(b, m) ? m + b : m;
}

template <typename T>
__device__ __forceinline__ T rtx_floor_divide(T a, T b) {
    if (b == 0) return a / b;
    T m = fmod(a, b);
    T d = (a - m) / b;
    if (rtx_mod_fix(b, m)) d -= 1;
    if (d != 0) {
        T f = floor(d);
        if (d - f > (T)0.5) f += 1;
        return f;
    }
    return copysign((T)0, a / b);
}

#define RTX_BINARY(NAME, FN, T)                                                            \
    extern "C" __global__ void NAME(const T* a, const T* b, T* out, long long n) {         \
        long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;                     \
        if (i < n) out[i] = FN(a[i], b[i]);                                                 \
    }

RTX_BINARY(floor_divide_f32, rtx_floor_divide<float>, float)
RTX_BINARY(floor_divide_f64, rtx_floor_divide<double>, double)
RTX_BINARY(remainder_f32, rtx_remainder<float>, float)
RTX_BINARY(remainder_f64, rtx_remainder<double>, double)
