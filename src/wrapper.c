/*
** wrapper.c -- a plugin's wrapper of a library's function (wrapper.h).
*/
#include "wrapper.h"

#include <string.h>

#include "frame.h"

/* Whether name b is a, or a with a prefix or a suffix joined by '_'. */
static int affixed (const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (a[0] == '?' || la < 2 || lb < la)
    return 0;
  if (lb == la)
    return strcmp(a, b) == 0;
  return (b[lb - la - 1] == '_' && strcmp(b + lb - la, a) == 0) ||
         (b[la] == '_' && strncmp(b, a, la) == 0);
}

/* Either way: a wrapper of a wrapper is called by its keeper's name. */
static int names_match (const char *w, const char *f) {
  return affixed(w, f) || affixed(f, w);
}

/* Whether the function on the top of L's stack holds fn in an upvalue. */
static int holds (lua_State *L, const void *fn) {
  int i, found = 0;
  for (i = 1; !found && lua_getupvalue(L, -1, i) != NULL; i++) {
    found = lua_type(L, -1) == LUA_TFUNCTION && lua_topointer(L, -1) == fn;
    lua_pop(L, 1);
  }
  return found;
}

/* The function of frame ar, by its address; NULL where it cannot tell. */
static const void *function_of (pm_State *S, lua_State *L, lua_Debug *ar) {
  const void *p = NULL;
  if (S->frame_direct)
    return pm_frame_function(ar->i_ci);
  if (lua_getinfo(L, "f", ar)) {
    p = lua_topointer(L, -1);
    lua_pop(L, 1);
  }
  return p;
}

/* The answer, found the slow way: names first, as most calls of a
** library by a plugin are its API's, called by another name. */
static int wraps (lua_State *L, lua_Debug *f, lua_Debug *w, const void *ff) {
  int r = 0;
  if (!lua_getinfo(L, "n", f) || f->name == NULL)
    return 0;
  if (!lua_getinfo(L, "nf", w))
    return 0;
  if (w->name != NULL && names_match(w->name, f->name))
    r = holds(L, ff);
  lua_pop(L, 1);
  return r;
}

static unsigned slot_of (const void *f, const void *w) {
  uintptr_t h = (uintptr_t)f * 31u ^ (uintptr_t)w;
  return (unsigned)((h >> 4) ^ (h >> 12)) % PM_WRAP_CACHE;
}

int pm_wraps (pm_State *S, lua_State *L, lua_Debug *f, lua_Debug *w) {
  pm_WrapAnswer *a;
  const void *ff, *wf;
  if (!lua_checkstack(L, 3) || (ff = function_of(S, L, f)) == NULL ||
      (wf = function_of(S, L, w)) == NULL)
    return 0;
  a = &S->wrap[slot_of(ff, wf)];
  if (a->f != ff || a->w != wf || a->forgets != S->e.fns_forgets) {
    a->f = ff;
    a->w = wf;
    a->forgets = S->e.fns_forgets;
    a->wraps = wraps(L, f, w, ff);
  }
  return a->wraps;
}

void pm_wrapper_forget (pm_State *S, const void *fn) {
  int i;
  for (i = 0; i < PM_WRAP_CACHE; i++)
    if (S->wrap[i].f == fn || S->wrap[i].w == fn)
      S->wrap[i].f = S->wrap[i].w = NULL;
}
