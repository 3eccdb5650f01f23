#ifndef KILN_API_SCHEMA_H
#define KILN_API_SCHEMA_H

extern const int schema_version;
extern const char schema_sql[];

#endif
