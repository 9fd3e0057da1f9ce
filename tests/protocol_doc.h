/*
 * protocol_doc.h — what rpc/PROTOCOL.md says, for tests that check the C
 * source and the document agree. PROTOCOL_MD is the document's path (set by
 * tests/meson.build).
 */
#ifndef KV_TEST_PROTOCOL_DOC_H
#define KV_TEST_PROTOCOL_DOC_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether PROTOCOL.md contains text, a line break inside a paragraph taken
 * for the space it is. false also when the file cannot be read. */
static inline bool protocol_says(const char *text)
{
	FILE *f = fopen(PROTOCOL_MD, "r");
	char *doc = NULL;
	long len;
	bool found = false;

	if (f == NULL)
		return false;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (doc = calloc(1, (size_t)len + 1)) != NULL &&
	    fread(doc, 1, (size_t)len, f) == (size_t)len) {
		for (char *p = doc; *p != '\0'; p++)
			if (*p == '\n')
				*p = ' ';
		found = strstr(doc, text) != NULL;
	}
	free(doc);
	fclose(f);
	return found;
}

#endif
