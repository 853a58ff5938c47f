#ifndef PORTAL_TOKEN_CQRENCODE_SHIM_H
#define PORTAL_TOKEN_CQRENCODE_SHIM_H

#include <qrencode.h>

/*
 * libqrencode is loaded with dlopen when a QR code is first drawn, not linked: only a first
 * two-factor enrollment draws one, and linking it would load it into every invocation, the
 * credential-helper `get` included. The Swift side resolves each function with dlsym and calls
 * it through these wrappers, which take the resolved address as `fn`.
 */

static inline QRcode *portal_qrcode_encode_data(void *fn, int size, const unsigned char *data, int version,
                                                QRecLevel level) {
    return ((QRcode *(*)(int, const unsigned char *, int, QRecLevel))fn)(size, data, version, level);
}

static inline void portal_qrcode_free(void *fn, QRcode *code) {
    ((void (*)(QRcode *))fn)(code);
}

#endif
