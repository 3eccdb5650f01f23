#ifndef KILN_STORE_SCHEMA_H
#define KILN_STORE_SCHEMA_H

extern const int schema_version;
extern const char schema_sql[];

/* What takes a database of version to - 1 to version to, the same SQL on
 * both backends; in order, the last one's to is schema_version. */
struct migration {
	int to;
	const char *sql;
};
extern const struct migration schema_migrations[];
extern const int schema_nmigrations;

#endif
