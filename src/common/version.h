/*
 * version: kiln's release, as hosts report it to their cluster
 * (docs/cluster.md) and the SDKs' package versions give it.
 */
#ifndef KILN_COMMON_VERSION_H
#define KILN_COMMON_VERSION_H

#define KILN_VERSION "0.1.0"

#endif
