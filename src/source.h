/*
** source.h -- source prefixes: the groups a chunk belongs to by its path.
**
** attach_source(prefix, group) puts every chunk whose path begins with
** prefix in the group.  Prefixes and chunks meet as keys: strings whose
** first byte says what the rest is.  '@' and a normalised path (path.c,
** the adapter's: absolute, without ".", ".." or repeated '/', symlinks
** resolved) for a chunk loaded from a file (an '@' source) and for a
** prefix read as a path, and where the path's last component is a
** symlink, the same with it as named (a plugin's file symlinked into its
** folder is in the folder too); '=' and the name as written for any other
** chunk (an '=' source without its '=', a string chunk's text) and for
** the prefix as written.  A prefix is kept under all its keys: a path and
** a chunk name each match it byte for byte, in their own kind.
**
** The prefixes' keys are in a hash table by their contents, with FNV-1a,
** which hashes a string a byte at a time: a chunk's key is hashed once,
** and each of its own prefixes as long as some key (a count by length
** says) is looked up as the hash reaches it, so that matching costs the
** key's length, not the number of prefixes, and finds them shortest
** first.  Attaching and detaching cost a prefix's length.
**
** A chunk's key (pm_Path) is interned, held by its chunk records, and
** remembers the sets its functions were resolved to.  The keys held are
** kept sorted, so that the chunks a prefix covers are a range: attaching
** or detaching a prefix forgets the cached resolutions of their sets'
** functions alone, and a prefix whose ranges hold none is reported
** unmatched (perfmon.info().unmatched_sources).  Until the first prefix
** is attached no chunk's key is made: a host that attaches none pays
** nothing.
*/
#ifndef PM_SOURCE_H
#define PM_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "group.h"

/* A chunk's key: its path or name, as source prefixes see it. */
typedef struct pm_Path pm_Path;

#define PM_KEY_MAX 1024 /* bytes of a key, its kind included */
#define PM_PATH_SETS 4 /* sets a chunk's key remembers */
/* A prefix's keys: as written, its path, and its path with its last
** component as named (where that is a symlink) */
#define PM_SOURCE_KEYS 3

typedef struct pm_SrcKey pm_SrcKey;
typedef struct pm_Source pm_Source;

/* A chunk's key (cut at PM_KEY_MAX), held by its chunk records. */
struct pm_Path {
  char *key;
  size_t len;
  int refs;
  int nsets; /* PM_PATH_SETS + 1: more sets than it remembers */
  int inherits; /* one of them was the empty set */
  const pm_Set *sets[PM_PATH_SETS];
};

typedef struct pm_KeySlot {
  uint32_t hash;
  pm_SrcKey *k; /* NULL: a free slot */
} pm_KeySlot;

typedef struct pm_Sources {
  pm_KeySlot *slot; /* the prefixes' keys by hash, under half full */
  size_t mask, nkeys;
  uint32_t *bylen; /* keys of each length 0..PM_KEY_MAX */
  size_t maxlen; /* no key is longer */
  pm_Source *first, *last; /* the prefixes attached, oldest first */
  int used; /* a prefix was attached: chunks' keys are made */
  pm_Path **paths; /* chunks' keys held, sorted */
  int npaths, pathcap;
} pm_Sources;

/* Every chunk with a key that begins with '=' + name (nlen bytes) or with
** '@' + one of its npaths (2 at most) paths (of plen bytes) belongs to g
** too; attaching (name, g) twice is attaching it once.  Returns 0 when
** memory ran out. */
int pm_source_attach (pm_Engine *E, const char *name, size_t nlen,
                      const char *const *path, const size_t *plen, int npaths,
                      pm_Group *g);
/* Detaches what attaching (name, g) attached; returns whether it was. */
int pm_source_detach (pm_Engine *E, const char *name, size_t nlen, pm_Group *g);
/* The key of kind '@' or '=' and s (len bytes), held once more; NULL when
** memory ran out. */
pm_Path *pm_path_intern (pm_Engine *E, int kind, const char *s, size_t len);
void pm_path_release (pm_Engine *E, pm_Path *p);
/* A function of p's chunk was resolved to s. */
void pm_path_note (pm_Path *p, const pm_Set *s);

/* The groups of the prefixes a chunk's keys (paths: PM_CHUNK_KEYS of them,
** the first not NULL, the second NULL or another) begin with, the longest
** prefixes' first, each once: up to max of them written to g; returns how
** many. */
int pm_source_groups (pm_Engine *E, pm_Path *const *paths, pm_Group **g,
                      int max);

/* Calls f on each prefix attached (as attached, oldest first) whose keys
** begin no chunk's key held. */
void pm_sources_unmatched (pm_Engine *E,
                           void (*f)(void *ud, const char *prefix, size_t len,
                                     const pm_Group *g),
                           void *ud);

void pm_sources_free (pm_Engine *E);

#endif
