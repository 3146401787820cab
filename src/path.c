/*
** path.c -- chunk paths as the file system names them (see path.h).
*/
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* lstat, readlink */
#endif

#include "path.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source.h"

/* Whether p (n bytes) names a directory by its form: a trailing '/', or
** a last component "." or "..". */
static int dir_form (const char *p, size_t n) {
  size_t i = n;
  while (i > 0 && p[i - 1] == '.')
    i--;
  return n > 0 && (p[n - 1] == '/' ||
                   ((n - i == 1 || n - i == 2) && (i == 0 || p[i - 1] == '/')));
}

#define MAX_LINKS 40 /* symlinks followed in one path, as the OS does */

/* p (n bytes, absolute, '\0'-terminated, in a buffer of PM_KEY_MAX)
** walked a component at a time into out: each that exists lstat'ed and,
** when a symlink, replaced by its target; "." dropped and ".." taking off
** the component before, which holds no symlink then, as the OS opens the
** path; from the first that does not exist on, the components as they are;
** the last one too unless `last`.  Returns out's length, or 0 when it does
** not fit; *linked says whether the last one was a symlink followed. */
static size_t walk (pm_State *S, char *p, size_t n, int last, char *out,
                    int *linked) {
  char link[PM_KEY_MAX];
  size_t i = 0, m = 0, j, k, known = 0;
  int missing = 0, hops = 0, dir = dir_form(p, n);
  struct stat st;
  ssize_t len;
  if (S->path_dirlen > 0 && n > S->path_dirlen && p[S->path_dirlen] == '/' &&
      memcmp(p, S->path_dir, S->path_dirlen) == 0) {
    memcpy(out, S->path_dir, S->path_dirlen);
    i = m = known = S->path_dirlen;
  }
  while (i < n) {
    while (i < n && p[i] == '/')
      i++;
    for (j = i; j < n && p[j] != '/'; j++)
      ;
    k = m; /* out without this component */
    if (j - i == 2 && p[i] == '.' && p[i + 1] == '.') {
      while (m > 0 && out[--m] != '/')
        ;
      known = known < m ? known : m;
    } else if (j == i || (j - i == 1 && p[i] == '.')) {
      /* nothing, or "." */
    } else if (m + 1 + (j - i) >= PM_KEY_MAX) {
      return 0;
    } else {
      out[m++] = '/';
      memcpy(out + m, p + i, j - i);
      m += j - i;
      out[m] = '\0';
      if (missing || (!last && j == n))
        ; /* as it is */
      else if (lstat(out, &st) != 0)
        missing = 1;
      else if (S_ISDIR(st.st_mode))
        known = m;
      else if (S_ISLNK(st.st_mode) && hops++ < MAX_LINKS &&
               (len = readlink(out, link, sizeof(link) - 1)) > 0 &&
               (size_t)len + (n - j) < PM_KEY_MAX) {
        /* walk the target and the rest, from the link's folder */
        *linked |= j == n;
        memcpy(link + len, p + j, n - j);
        n = (size_t)len + (n - j);
        memcpy(p, link, n);
        p[n] = '\0';
        m = link[0] == '/' ? 0 : k;
        known = known < m ? known : m;
        j = 0;
      }
    }
    i = j;
  }
  memcpy(S->path_dir, out, known);
  S->path_dirlen = known;
  if (m == 0 || (dir && out[m - 1] != '/'))
    out[m++] = '/';
  return m < PM_KEY_MAX ? m : 0;
}

/* path joined to the working directory into p (PM_KEY_MAX bytes); its
** length, or 0 when it does not fit. */
static size_t join (const char *path, size_t len, char *p) {
  size_t n = 0;
  if (len == 0)
    return 0;
  if (path[0] != '/') {
    if (getcwd(p, PM_KEY_MAX - 1) == NULL)
      return 0;
    n = strlen(p);
    p[n++] = '/';
  }
  if (n + len >= PM_KEY_MAX)
    return 0;
  memcpy(p + n, path, len);
  n += len;
  p[n] = '\0';
  return n;
}

size_t pm_path_normal (pm_State *S, const char *path, size_t len, char *out,
                       char *named, size_t *nlen) {
  char p[PM_KEY_MAX];
  size_t n = join(path, len, p), k;
  int linked = 0;
  *nlen = 0;
  if (n == 0 || (k = walk(S, p, n, 1, out, &linked)) == 0)
    return 0;
  if (linked) /* the walk rewrote p: from the start again */
    *nlen = walk(S, p, join(path, len, p), 0, named, &linked);
  return k;
}

pm_Path **pm_path_of (pm_State *S, pm_Chunk *c, const char *source,
                      size_t len) {
  char buf[PM_KEY_MAX], named[PM_KEY_MAX];
  size_t n, k;
  pm_Path **p;
  if (c == NULL)
    return NULL;
  p = c->path;
  if (p[0] != NULL)
    return p;
  if (*source == '@' &&
      (n = pm_path_normal(S, source + 1, len - 1, buf, named, &k)) > 0) {
    p[0] = pm_path_intern(&S->e, '@', buf, n);
    if (p[0] != NULL && k > 0 &&
        (p[1] = pm_path_intern(&S->e, '@', named, k)) == NULL) {
      pm_path_release(&S->e, p[0]);
      p[0] = NULL;
    }
  } else if (*source == '@') /* too long to normalise: as written */
    p[0] = pm_path_intern(&S->e, '@', source + 1, len - 1);
  else if (*source == '=')
    p[0] = pm_path_intern(&S->e, '=', source + 1, len - 1);
  else
    p[0] = pm_path_intern(&S->e, '=', source, len);
  return p[0] != NULL ? p : NULL;
}
