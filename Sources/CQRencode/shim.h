#ifndef PORTAL_TOKEN_CQRENCODE_SHIM_H
#define PORTAL_TOKEN_CQRENCODE_SHIM_H

#include <qrencode.h>

#endif
