/* SPDX-License-Identifier: MIT */
/*
 * internal.h - every private header at once, for the loop's files until
 * they include what they use.
 */
#ifndef LULL_INTERNAL_H
#define LULL_INTERNAL_H

#include "handles.h"
#include "park.h"
#include "record.h"
#include "region.h"
#include "sys.h"

#endif /* LULL_INTERNAL_H */
