// SVG pictures rasterised to PNG with librsvg and cairo, for those who would rather attach an
// image than a vector file.
#include <cairo.h>
#include <librsvg/rsvg.h>

#include <cmath>
#include <memory>

#include "optiflow/explore/compare.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::explore {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw support::InputError(support::SourceLocation{"plot", 0, 0, "png"}, what);
}

struct GObjectUnref {
  void operator()(RsvgHandle* h) const { g_object_unref(h); }
};
struct SurfaceDestroy {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct ContextDestroy {
  void operator()(cairo_t* c) const { cairo_destroy(c); }
};

cairo_status_t append(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

std::string svg_to_png(const std::string& svg, double scale) {
  GError* error = nullptr;
  std::unique_ptr<RsvgHandle, GObjectUnref> handle(
      rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg.data()), svg.size(), &error));
  if (!handle) {
    const std::string message = error ? error->message : "unreadable SVG";
    if (error) g_error_free(error);
    fail("cannot read the SVG: " + message);
  }
  double width = 0, height = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle.get(), &width, &height))
    fail("the SVG has no size in pixels");
  std::unique_ptr<cairo_surface_t, SurfaceDestroy> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, static_cast<int>(std::ceil(width * scale)),
                                 static_cast<int>(std::ceil(height * scale))));
  std::unique_ptr<cairo_t, ContextDestroy> cr(cairo_create(surface.get()));
  cairo_scale(cr.get(), scale, scale);
  cairo_set_source_rgb(cr.get(), 1, 1, 1);  // PNG viewers show transparency as black or grey
  cairo_paint(cr.get());
  const RsvgRectangle viewport{0, 0, width, height};
  if (!rsvg_handle_render_document(handle.get(), cr.get(), &viewport, &error)) {
    const std::string message = error ? error->message : "rendering failed";
    if (error) g_error_free(error);
    fail("cannot render the SVG: " + message);
  }
  std::string png;
  if (cairo_surface_write_to_png_stream(surface.get(), append, &png) != CAIRO_STATUS_SUCCESS)
    fail("cannot encode the PNG");
  return png;
}

}  // namespace optiflow::explore
