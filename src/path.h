/*
** path.h -- chunk paths as the file system names them.
**
** The adapter's half of source prefixes (source.h), which asks the OS:
** the working directory and symlinks.  A prefix is normalised when it is
** attached, a chunk's path at its first resolution (the nearest perfmon
** comes to its load), and kept in its chunk record: once, not at every
** resolution.
*/
#ifndef PM_PATH_H
#define PM_PATH_H

#include "state.h"

/* The normal form of path (len bytes) into out (PM_KEY_MAX - 1 bytes at
** most): absolute against the working directory now, without "." and ".."
** components or repeated '/', its symlinks resolved as far as it exists,
** a trailing '/' kept; where its last component is a symlink, the same
** with that one as named into named (*nlen bytes; else *nlen is 0): a
** file symlinked into a plugin's folder is in the folder, and in its
** target's.  Returns its length, or 0 when it does not fit or the working
** directory cannot be read.  The folders of the last path are remembered
** (S->path_dir) as holding no symlink: one replaced by a symlink since is
** not seen by the paths that follow under it. */
size_t pm_path_normal (pm_State *S, const char *path, size_t len, char *out,
                       char *named, size_t *nlen);

/* The keys of c's chunk (c->path), whose source is source (len bytes):
** made at the first call.  An '@' source is a path, normalised, with its
** last component resolved and, where that is a symlink, as named too; any
** other is a name, as written.  NULL when memory ran out. */
pm_Path **pm_path_of (pm_State *S, pm_Chunk *c, const char *source, size_t len);

#endif
