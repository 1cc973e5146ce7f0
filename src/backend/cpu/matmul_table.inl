// The table of one SIMD level: tile shapes and the kernels of every weight
// type. Tile shapes only trade speed (they never change a result). Chosen
// with bench/matmul_bench.cc --threads=1 on Zen 4: the integer kernels gain
// most from many tokens per tile (a decoded block serves 16 tokens; the
// accumulators, touched once per group of blocks, may live in memory), the
// f32 kernels need their accumulators in registers (AVX2 has 16, AVX-512 32).
// Rows per tile are also the batch-1 path's rows in flight.
// Packed block32 tiles: panels of 8 rows (lane = row), 2 panels by 16 tokens
// where there are 32 registers, 1 panel by 16 with AVX2's 16.
// Packed K-quant tiles: 2 rows by 32 tokens, against 2 x 16 (4 % on the 1.5B's
// prefill: a super-block's decode serves twice the tokens), 1 x 16, 2 x 8,
// 3 x 16 and 4 x 8 (5-25 % slower).

#if FOLIO_MATMUL_WIDE
constexpr int kBlock32Rows = 2, kBlock32Tokens = 16;
constexpr int kPackedRows = 16, kPackedTokens = 16;
constexpr int kKQuantRows = 2, kKQuantTokens = 16;
constexpr int kKQuantPackedRows = 2, kKQuantPackedTokens = 32;
constexpr int kF32Rows = 4, kF32Tokens = 4;
#else
constexpr int kBlock32Rows = 2, kBlock32Tokens = 16;
constexpr int kPackedRows = 8, kPackedTokens = 16;
constexpr int kKQuantRows = 1, kKQuantTokens = 16;
constexpr int kKQuantPackedRows = 1, kKQuantPackedTokens = 16;
constexpr int kF32Rows = 2, kF32Tokens = 4;
#endif

// The eight tiles of a kernel template Tile<R, T>: R or P rows by T, T / 4,
// 2 and 1 tokens (2 where T / 4 > 2: speculative verification runs batches of
// 2 to 7 tokens, which would otherwise fall to single-token tiles).
template <int R, int T, template <int, int> class Tile, int P = 1>
WeightKernels tiles(ActFormat act) {
  constexpr int kMid = T / 4 > 1 ? T / 4 : 1;
  constexpr int kSmall = kMid > 2 ? 2 : 1;
  WeightKernels k;
  k.act = act;
  k.rows = R;
  k.panel_rows = P;
  k.tokens[0] = T;
  k.tokens[1] = kMid;
  k.tokens[2] = kSmall;
  k.tokens[3] = 1;
  k.tiles[0][0] = Tile<R, T>::run;
  k.tiles[0][1] = Tile<R, kMid>::run;
  k.tiles[0][2] = Tile<R, kSmall>::run;
  k.tiles[0][3] = Tile<R, 1>::run;
  k.tiles[1][0] = Tile<P, T>::run;
  k.tiles[1][1] = Tile<P, kMid>::run;
  k.tiles[1][2] = Tile<P, kSmall>::run;
  k.tiles[1][3] = Tile<P, 1>::run;
  return k;
}

template <class F>
struct Block32Tile {
  template <int R, int T>
  struct Tile {
    static void run(const TileArgs& a) { tile_q8_block32<F, R, T>(a); }
  };
};

template <class F>
struct RowsTile {
  template <int R, int T>
  struct Tile {
    static void run(const TileArgs& a) { tile_q8_rows<F, R, T>(a); }
  };
};

template <class F>
struct PanelTile {
  template <int R, int T>
  struct Tile {
    static void run(const TileArgs& a) { tile_q8_panels<F, R, T>(a); }
  };
};

template <int R, int T>
struct Nvfp4Tile {
  static void run(const TileArgs& a) { tile_q8_nvfp4<R, T>(a); }
};

template <class F>
struct KQuantTile {
  template <int R, int T>
  struct Tile {
    static void run(const TileArgs& a) { tile_q8_k<F, R, T>(a); }
  };
};

template <class F>
struct KQuantPackedTile {
  template <int R, int T>
  struct Tile {
    static void run(const TileArgs& a) { tile_q8_k_packed<F, R, T>(a); }
  };
};

template <class D>
struct F32Tile {
  template <int R, int T>
  struct Tile {
    static void run(const TileArgs& a) { tile_f32<D, R, T>(a); }
  };
};

template <class F>
WeightKernels block32_kernels() {
  return tiles<kBlock32Rows, kBlock32Tokens, Block32Tile<F>::template Tile>(ActFormat::kQ8x32);
}

// The packable block32 formats in the file's layout: one panel's rows at a
// time, for the bits of the packed kernels.
template <class F>
WeightKernels rows_kernels() {
  return tiles<kPanelRows, kBlock32Tokens, RowsTile<F>::template Tile, kPanelRows>(ActFormat::kQ8x32);
}

template <class F>
WeightKernels packed_kernels() {
  return tiles<kPackedRows, kPackedTokens, PanelTile<F>::template Tile, kPanelRows>(ActFormat::kQ8x32);
}

WeightKernels nvfp4_kernels() { return tiles<kBlock32Rows, kBlock32Tokens, Nvfp4Tile>(ActFormat::kQ8x32); }

template <class F>
WeightKernels kquant_kernels() {
  return tiles<kKQuantRows, kKQuantTokens, KQuantTile<F>::template Tile>(ActFormat::kQ8x256);
}

template <class F>
WeightKernels kquant_packed_kernels() {
  return tiles<kKQuantPackedRows, kKQuantPackedTokens, KQuantPackedTile<F>::template Tile>(ActFormat::kQ8x256Packed);
}

template <class D>
WeightKernels f32_kernels() {
  return tiles<kF32Rows, kF32Tokens, F32Tile<D>::template Tile>(ActFormat::kF32);
}

template <class D>
void set_f32(MatmulKernels& k, DType type) {
  const auto i = static_cast<int>(type);
  k.f32[i] = f32_kernels<D>();
  k.dequantize[i] = dequantize_row_simd<D>;
}

MatmulKernels make_kernels() {
  MatmulKernels k;
  set_f32<DeqF32>(k, DType::F32);
  set_f32<DeqF16>(k, DType::F16);
  set_f32<DeqBF16>(k, DType::BF16);
  set_f32<DeqBlock32<Q4_0>>(k, DType::Q4_0);
  set_f32<DeqBlock32<Q4_1>>(k, DType::Q4_1);
  set_f32<DeqBlock32<Q5_0>>(k, DType::Q5_0);
  set_f32<DeqBlock32<Q5_1>>(k, DType::Q5_1);
  set_f32<DeqQ8_0>(k, DType::Q8_0);
  set_f32<DeqK<Q2_K>>(k, DType::Q2_K);
  set_f32<DeqK<Q3_K>>(k, DType::Q3_K);
  set_f32<DeqK<Q4_K>>(k, DType::Q4_K);
  set_f32<DeqK<Q5_K>>(k, DType::Q5_K);
  set_f32<DeqK<Q6_K>>(k, DType::Q6_K);
  set_f32<DeqGrid32<IQ4_NL>>(k, DType::IQ4_NL);
  set_f32<DeqGrid32<MXFP4>>(k, DType::MXFP4);
  set_f32<DeqIQ4XS>(k, DType::IQ4_XS);
  set_f32<DeqNVFP4>(k, DType::NVFP4);

  // Float weights take the f32 kernels at both precisions.
  const DType float_types[] = {DType::F32, DType::F16, DType::BF16};
  for (DType t : float_types) k.q8[static_cast<int>(t)] = k.f32[static_cast<int>(t)];
  k.q8[static_cast<int>(DType::Q4_0)] = rows_kernels<Q4_0>();
  k.q8[static_cast<int>(DType::Q4_1)] = rows_kernels<Q4_1>();
  k.q8[static_cast<int>(DType::Q5_0)] = rows_kernels<Q5_0>();
  k.q8[static_cast<int>(DType::Q5_1)] = rows_kernels<Q5_1>();
  k.q8[static_cast<int>(DType::Q8_0)] = rows_kernels<Q8_0>();
  k.q8_packed[static_cast<int>(DType::Q4_0)] = packed_kernels<Q4_0>();
  k.q8_packed[static_cast<int>(DType::Q4_1)] = packed_kernels<Q4_1>();
  k.q8_packed[static_cast<int>(DType::Q5_0)] = packed_kernels<Q5_0>();
  k.q8_packed[static_cast<int>(DType::Q5_1)] = packed_kernels<Q5_1>();
  k.q8_packed[static_cast<int>(DType::Q8_0)] = packed_kernels<Q8_0>();
  k.q8[static_cast<int>(DType::Q2_K)] = kquant_kernels<Q2_K>();
  k.q8[static_cast<int>(DType::Q3_K)] = kquant_kernels<Q3_K>();
  k.q8[static_cast<int>(DType::Q4_K)] = kquant_kernels<Q4_K>();
  k.q8[static_cast<int>(DType::Q5_K)] = kquant_kernels<Q5_K>();
  k.q8[static_cast<int>(DType::Q6_K)] = kquant_kernels<Q6_K>();
  k.q8_packed[static_cast<int>(DType::Q2_K)] = kquant_packed_kernels<Q2_K>();
  k.q8_packed[static_cast<int>(DType::Q3_K)] = kquant_packed_kernels<Q3_K>();
  k.q8_packed[static_cast<int>(DType::Q4_K)] = kquant_packed_kernels<Q4_K>();
  k.q8_packed[static_cast<int>(DType::Q5_K)] = kquant_packed_kernels<Q5_K>();
  k.q8_packed[static_cast<int>(DType::Q6_K)] = kquant_packed_kernels<Q6_K>();
  k.q8[static_cast<int>(DType::IQ4_NL)] = block32_kernels<IQ4_NL>();
  k.q8[static_cast<int>(DType::MXFP4)] = block32_kernels<MXFP4>();
  k.q8[static_cast<int>(DType::IQ4_XS)] = block32_kernels<IQ4_XS>();
  k.q8[static_cast<int>(DType::NVFP4)] = nvfp4_kernels();
  k.quantize = quantize_act;
  return k;
}
