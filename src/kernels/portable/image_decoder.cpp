// ImageDecoder-20: decodes an encoded image (uint8 bytes) to [H, W, 3]
// (RGB or BGR) or [H, W, 1] (Grayscale, ITU-R 601-2 luma as PIL computes
// it). JPEG through libjpeg and PNG through libpng (Debian's libjpeg-dev,
// libpng-dev; KILN_HAVE_JPEG / KILN_HAVE_PNG), binary PNM (P5/P6) and
// uncompressed 24/32-bit BMP directly. Other formats are refused by name.
#include <cctype>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/registry.h"

#ifdef KILN_HAVE_JPEG
#include <jpeglib.h>
#endif
#ifdef KILN_HAVE_PNG
#include <png.h>
#endif

namespace kiln::kernels {

namespace {

struct Image {
  int64_t h = 0, w = 0, c = 0;  // c: 1 (gray) or 3 (RGB)
  std::vector<uint8_t> px;
};

#ifdef KILN_HAVE_JPEG
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
};

void jpeg_fail(j_common_ptr cinfo) { std::longjmp(reinterpret_cast<JpegError*>(cinfo->err)->jump, 1); }

bool decode_jpeg(const uint8_t* data, size_t size, Image* img) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = cinfo.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  img->h = cinfo.output_height;
  img->w = cinfo.output_width;
  img->c = cinfo.output_components;
  img->px.resize(static_cast<size_t>(img->h * img->w * img->c));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = img->px.data() + static_cast<size_t>(cinfo.output_scanline) * static_cast<size_t>(img->w * img->c);
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}
#endif

#ifdef KILN_HAVE_PNG
bool decode_png(const uint8_t* data, size_t size, Image* img) {
  png_image p;
  std::memset(&p, 0, sizeof p);
  p.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&p, data, size)) return false;
  const bool gray = (p.format & PNG_FORMAT_FLAG_COLOR) == 0;
  p.format = gray ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  img->h = p.height;
  img->w = p.width;
  img->c = gray ? 1 : 3;
  img->px.resize(PNG_IMAGE_SIZE(p));
  if (!png_image_finish_read(&p, nullptr, img->px.data(), 0, nullptr)) {
    png_image_free(&p);
    return false;
  }
  return true;
}
#endif

// Binary PNM: P5 (gray) or P6 (RGB), maxval 255.
bool decode_pnm(const uint8_t* data, size_t size, Image* img) {
  size_t at = 2;
  int64_t fields[3] = {};
  for (int64_t& f : fields) {
    while (at < size && (std::isspace(data[at]) || data[at] == '#')) {
      if (data[at] == '#')
        while (at < size && data[at] != '\n') ++at;
      else
        ++at;
    }
    if (at >= size || !std::isdigit(data[at])) return false;
    while (at < size && std::isdigit(data[at]) && f < (int64_t{1} << 30)) f = f * 10 + (data[at++] - '0');
  }
  ++at;  // one whitespace byte before the raster
  img->w = fields[0];
  img->h = fields[1];
  img->c = data[1] == '5' ? 1 : 3;
  const auto n = static_cast<size_t>(img->w * img->h * img->c);
  if (fields[2] != 255 || at > size || size - at < n) return false;
  img->px.assign(data + at, data + at + n);
  return true;
}

uint32_t le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Uncompressed BMP with 24 or 32 bits per pixel (rows bottom-up unless the
// height is negative).
bool decode_bmp(const uint8_t* data, size_t size, Image* img) {
  if (size < 54) return false;
  const uint32_t offset = le(data + 10, 4);
  const auto width = static_cast<int32_t>(le(data + 18, 4));
  const auto height = static_cast<int32_t>(le(data + 22, 4));
  const uint32_t bpp = le(data + 28, 2), compression = le(data + 30, 4);
  if ((bpp != 24 && bpp != 32) || (compression != 0 && compression != 3) || width <= 0 || height == 0) return false;
  const int64_t h = height < 0 ? -static_cast<int64_t>(height) : height;
  const int64_t stride = ((static_cast<int64_t>(width) * bpp / 8) + 3) / 4 * 4;
  if (offset > size || static_cast<int64_t>(size - offset) < stride * h) return false;
  img->h = h;
  img->w = width;
  img->c = 3;
  img->px.resize(static_cast<size_t>(h * width * 3));
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = data + offset + (height > 0 ? h - 1 - y : y) * stride;
    for (int64_t x = 0; x < width; ++x) {
      const uint8_t* p = row + x * (bpp / 8);
      uint8_t* o = img->px.data() + (y * width + x) * 3;
      o[0] = p[2];
      o[1] = p[1];
      o[2] = p[0];
    }
  }
  return true;
}

// Returns "" on success, else what the format is (for the error).
std::string decode(const uint8_t* d, size_t n, Image* img) {
  if (n >= 3 && d[0] == 0xff && d[1] == 0xd8) {
#ifdef KILN_HAVE_JPEG
    return decode_jpeg(d, n, img) ? "" : "a corrupt JPEG";
#else
    return "JPEG (Kiln was built without libjpeg)";
#endif
  }
  if (n >= 8 && std::memcmp(d, "\x89PNG", 4) == 0) {
#ifdef KILN_HAVE_PNG
    return decode_png(d, n, img) ? "" : "a corrupt PNG";
#else
    return "PNG (Kiln was built without libpng)";
#endif
  }
  if (n >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6')) return decode_pnm(d, n, img) ? "" : "an unsupported PNM";
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return decode_bmp(d, n, img) ? "" : "an unsupported BMP";
  if (n >= 4 && (std::memcmp(d, "II*", 3) == 0 || std::memcmp(d, "MM", 2) == 0)) return "TIFF";
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0) return "WebP";
  if (n >= 12 && (std::memcmp(d + 4, "jP", 2) == 0 || std::memcmp(d, "\xff\x4f\xff\x51", 4) == 0)) return "JPEG 2000";
  return "an unknown format";
}

class ImageDecoderKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    format_ = init.attr_string("pixel_format", "RGB");
    if (format_ != "RGB" && format_ != "BGR" && format_ != "Grayscale")
      return invalid_argument("pixel_format '", format_, "' is not RGB, BGR or Grayscale");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (encoded_stream) is missing");
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kUInt8 || x.rank() != 1)
      return invalid_argument("encoded_stream must be 1-D uint8");
    Image img;
    const std::string what = decode(x.data<uint8_t>(), static_cast<size_t>(x.numel()), &img);
    if (!what.empty()) return unimplemented("cannot decode ", what, " image");
    const int64_t c = format_ == "Grayscale" ? 1 : 3;
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kUInt8, Shape{img.h, img.w, c}));
    uint8_t* o = y->data<uint8_t>();
    for (int64_t i = 0; i < img.h * img.w; ++i) {
      const uint8_t* p = img.px.data() + i * img.c;
      const uint8_t r = p[0], g = img.c == 3 ? p[1] : p[0], b = img.c == 3 ? p[2] : p[0];
      if (c == 1) {
        o[i] = img.c == 1 ? r : static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
      } else if (format_ == "RGB") {
        o[3 * i] = r, o[3 * i + 1] = g, o[3 * i + 2] = b;
      } else {
        o[3 * i] = b, o[3 * i + 1] = g, o[3 * i + 2] = r;
      }
    }
    return Status::ok();
  }

 private:
  std::string format_;
};

}  // namespace

void register_image_decoder_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "ImageDecoder", .since_version = 20, .until_version = 1000,
         .dtypes = dtype_bit(DType::kUInt8), .type_input = 0, .factory = make_kernel<ImageDecoderKernel>, .flags = 0});
}

}  // namespace kiln::kernels
