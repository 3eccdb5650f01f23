#ifndef KILN_STORE_SCHEMA_H
#define KILN_STORE_SCHEMA_H

extern const int schema_version;
extern const char schema_sql[];

#endif
