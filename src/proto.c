/*
** proto.c -- Lua 5.4's prototype tree, and its start-up check.
*/
#include "proto.h"

#include <string.h>

#include <lauxlib.h>

#include "frame.h"

/*
** {======================================================
** The private layout (lobject.h), up to the fields read here
** =======================================================
*/

typedef unsigned char pm_Byte;

typedef struct Proto {
  void *next;
  pm_Byte tt, marked;
  pm_Byte numparams, is_vararg, maxstacksize;
  int sizeupvalues, sizek, sizecode, sizelineinfo, sizep, sizelocvars,
      sizeabslineinfo, linedefined, lastlinedefined;
  void *k, *code;
  struct Proto **p;
  void *upvalues, *lineinfo, *abslineinfo, *locvars;
  const void *source; /* a TString */
} Proto;

typedef struct TValue {
  void *gc; /* Value: the object, for a collectable one */
  pm_Byte tt;
} TValue;

typedef struct UpVal {
  void *next;
  pm_Byte tt, marked, tbc;
  TValue *v; /* its value, on the stack or in u */
} UpVal;

typedef struct Upvaldesc {
  const void *name; /* a TString, or NULL (stripped) */
  pm_Byte instack, idx, kind;
} Upvaldesc;

typedef struct LClosure {
  void *next;
  pm_Byte tt, marked, nupvalues;
  void *gclist;
  Proto *p;
  UpVal *upvals[1];
} LClosure;

typedef struct GCObject {
  struct GCObject *next;
  pm_Byte tt;
} GCObject;

typedef struct State { /* lua_State, up to l_G */
  void *next;
  pm_Byte tt, marked, status, allowhook;
  unsigned short nci;
  void *top;
  struct Global *l_G;
} State;

typedef struct Global { /* global_State, up to allgc */
  lua_Alloc frealloc;
  void *ud;
  ptrdiff_t totalbytes, GCdebt;
  size_t GCestimate, lastatomic;
  struct {
    void *hash;
    int nuse, size;
  } strt;
  TValue l_registry, nilvalue;
  unsigned int seed;
  /* currentwhite, gcstate, gckind and 8 more (7 before 5.4.4): the
  ** pointer after them is aligned the same */
  pm_Byte currentwhite, gcstate, gckind, more[8];
  GCObject *allgc;
} Global;

#define PM_VLCL 6 /* makevariant(LUA_TFUNCTION, 0) */
#define PM_VPROTO 10 /* makevariant(LUA_TPROTO, 0) */
#define PM_VTHREAD 8 /* makevariant(LUA_TTHREAD, 0) */
#define PM_CTABLE 0x45 /* ctb(LUA_VTABLE): a table in a TValue */
#define PM_GCSATOMIC 2 /* gcstates up to it: no object freed since */
#define PM_GCSCALLFIN 7 /* and from it on: the sweep is over */
#define PM_GCSPAUSE 8

/* }====================================================== */

const void *pm_proto_of (const void *f) {
  return ((const LClosure *)f)->p;
}

int pm_proto_is_main (const void *p) {
  return ((const Proto *)p)->linedefined == 0;
}

const void *pm_proto_source (const void *p) {
  return ((const Proto *)p)->source;
}

int pm_proto_walk (const void *root, int (*fn)(const void *p, void *arg),
                   void *arg) {
  const Proto *p = root;
  int i;
  if (!fn(p, arg))
    return 0;
  for (i = 0; i < p->sizep; i++) /* NULL: a parse that ran out of memory */
    if (p->p[i] != NULL && !pm_proto_walk(p->p[i], fn, arg))
      return 0;
  return 1;
}

/* The table held by upvalue i of closure cl, or NULL.  A closure whose
** making ran out of memory is left garbage without its upvalues. */
static const void *upvalue_table (const LClosure *cl, int i) {
  const TValue *v = cl->upvals[i] != NULL ? cl->upvals[i]->v : NULL;
  return v != NULL && v->tt == PM_CTABLE ? v->gc : NULL;
}

const void *pm_proto_env (const void *f, size_t offset) {
  const LClosure *cl = f;
  const Upvaldesc *up = cl->p->upvalues;
  int i;
  if (pm_proto_is_main(cl->p) && cl->nupvalues > 0)
    return upvalue_table(cl, 0); /* a main function: _ENV by construction */
  for (i = 0; i < cl->nupvalues && i < cl->p->sizeupvalues; i++)
    if (up[i].name != NULL &&
        strcmp((const char *)up[i].name + offset, "_ENV") == 0)
      return upvalue_table(cl, i);
  return NULL;
}

/* The index of f's upvalue that came down from its parent's upvalue 0
** (descriptor: not in the parent's stack, index 0) when it holds a table;
** -1 when none does. */
static int passed_env (const LClosure *cl) {
  const Upvaldesc *up = cl->p->upvalues;
  int i;
  for (i = 0; i < cl->nupvalues && i < cl->p->sizeupvalues; i++)
    if (!up[i].instack && up[i].idx == 0)
      return upvalue_table(cl, i) != NULL ? i : -1;
  return -1;
}

int pm_proto_load_env (const void *f) {
  int i = passed_env(f);
  return i >= 0 ? i + 1 : 1;
}

const void *pm_proto_passed_env (const void *f) {
  int i = passed_env(f);
  return i >= 0 ? upvalue_table(f, i) : NULL;
}

const void *pm_proto_upvalue (const void *f, int i) {
  const LClosure *cl = f;
  return i < cl->nupvalues ? cl->upvals[i] : NULL;
}

/* The list of all objects, with no dead one left in it. */
static GCObject *all_objects (lua_State *L) {
  Global *g = ((State *)L)->l_G;
  if (g->gcstate > PM_GCSATOMIC && g->gcstate < PM_GCSCALLFIN)
    lua_gc(L, LUA_GCCOLLECT); /* the sweep would leave freed objects seen */
  return g->allgc;
}

int pm_proto_heap (lua_State *L,
                   int (*fn)(const void *obj, int proto, void *arg),
                   void *arg) {
  GCObject *o;
  for (o = all_objects(L); o != NULL; o = o->next) {
    /* garbage that a memory error left half made may have no prototype,
       and is no chunk's; a prototype with no source is stripped (or half
       made: its sizes are set as its arrays are, and a record keyed by
       it goes with it) */
    const Proto *p = o->tt == PM_VLCL     ? ((const LClosure *)o)->p
                     : o->tt == PM_VPROTO ? (const Proto *)o
                                          : NULL;
    if (p != NULL && !fn(o, o->tt == PM_VPROTO, arg))
      return 0;
  }
  return 1;
}

void pm_proto_threads (lua_State *L, void (*fn)(lua_State *co, void *arg),
                       void *arg) {
  GCObject *o;
  for (o = all_objects(L); o != NULL; o = o->next)
    if (o->tt == PM_VTHREAD)
      fn((lua_State *)o, arg);
}

/*
** {======================================================
** The start-up check
** =======================================================
*/

static _Thread_local struct {
  size_t offset;
  int ok;
} check;

/* Whether p's n upvalue descriptors say, from the first, in stack
** (instack) or not, and at which index (idx): as up gives them, two bytes
** each. */
static int described (const Proto *p, int n, const char *up) {
  const Upvaldesc *d = p->upvalues;
  int i;
  if (p->sizeupvalues != n)
    return 0;
  for (i = 0; i < n; i++)
    if (d[i].instack != up[2 * i] || d[i].idx != up[2 * i + 1])
      return 0;
  return 1;
}

/* Whether the function on the top of the stack has prototype p, read
** through the layout, with the parameters, lines and source that
** lua_getinfo gives. */
static int agrees (lua_State *L, const Proto *p) {
  lua_Debug ar;
  const LClosure *cl = lua_topointer(L, -1);
  if (cl->tt != PM_VLCL || cl->p != p || p->tt != PM_VPROTO)
    return 0;
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">Su", &ar);
  return ar.nparams == p->numparams && ar.isvararg == p->is_vararg &&
         ar.linedefined == p->linedefined &&
         ar.lastlinedefined == p->lastlinedefined &&
         (const char *)p->source + check.offset == ar.source;
}

/* Protected: loading and running the chunk can raise a memory error. */
static int run_check (lua_State *L) {
  const Proto *root;
  if (luaL_loadstring(L, "local pad, up = 0, 1\n"
                         "local function a(x, y) return x end\n"
                         "local function b(...)\n"
                         "  return function(z) return up + z end\n"
                         "end\n"
                         "return a, b, b()") != LUA_OK)
    return lua_error(L);
  root = pm_proto_of(lua_topointer(L, -1));
  if (!agrees(L, root) || root->sizep != 2)
    return 0;
  /* _ENV, in the stack of no function; b's `up`, register 1 of main's
     stack; inner's, b's upvalue 0 */
  if (!described(root, 1, "\1\0") || !described(root->p[1], 1, "\1\1") ||
      root->p[1]->sizep != 1 || !described(root->p[1]->p[0], 1, "\0\0"))
    return 0;
  lua_call(L, 0, 3); /* a b inner */
  check.ok = agrees(L, root->p[1]->p[0]) && root->p[1]->sizep == 1;
  lua_pop(L, 1);
  check.ok = check.ok && agrees(L, root->p[1]);
  lua_pop(L, 1);
  check.ok = check.ok && agrees(L, root->p[0]) && root->p[0]->sizep == 0;
  return 0;
}

/* The heap: the universe's allocator and registry where global_State has
** them, a new object at the head of allgc, and an upvalue's table, with
** its name, where lua_getupvalue says. */
static int run_heap_check (lua_State *L) {
  const Global *g = ((const State *)L)->l_G;
  void *ud;
  const char *name;
  const LClosure *cl;
  lua_Alloc f = lua_getallocf(L, &ud);
  if (g->frealloc != f || g->ud != ud || g->l_registry.tt != PM_CTABLE ||
      g->l_registry.gc != lua_topointer(L, LUA_REGISTRYINDEX) ||
      g->gckind > 1 || g->gcstate > PM_GCSPAUSE)
    return 0;
  if (luaL_loadstring(L, "local t = {}\n"
                         "return function() t[1] = _ENV end") != LUA_OK)
    return lua_error(L);
  lua_call(L, 0, 1);
  lua_newtable(L);
  if ((const void *)g->allgc != lua_topointer(L, -1))
    return 0;
  lua_pop(L, 1);
  cl = lua_topointer(L, -1);
  name = lua_getupvalue(L, -1, 1); /* t */
  check.ok = name != NULL && cl->nupvalues == 2 &&
             (const char *)((const Upvaldesc *)cl->p->upvalues)[0].name +
                     check.offset ==
                 name &&
             upvalue_table(cl, 0) == lua_topointer(L, -1);
  lua_pop(L, 1);
  lua_pushglobaltable(L);
  check.ok = check.ok && pm_proto_env(cl, check.offset) == lua_topointer(L, -1);
  check.ok = check.ok && pm_proto_upvalue(cl, 0) == lua_upvalueid(L, -2, 1) &&
             pm_proto_upvalue(cl, 1) == lua_upvalueid(L, -2, 2) &&
             pm_proto_upvalue(cl, 2) == NULL;
  lua_newthread(L); /* a thread, at the head of allgc */
  check.ok = check.ok && (const void *)g->allgc == lua_topointer(L, -1) &&
             ((const GCObject *)g->allgc)->tt == PM_VTHREAD;
  return 0;
}

int pm_proto_heap_verify (lua_State *L) {
  check.ok = 0;
  pm_frame_run_check(L, run_heap_check);
  return check.ok;
}

/* Protected: the string can raise a memory error. */
static int run_offset (lua_State *L) {
  lua_pushliteral(L, "_ENV");
  check.offset =
      (size_t)(lua_tostring(L, -1) - (const char *)lua_topointer(L, -1));
  return 0;
}

int pm_proto_verify (lua_State *L) {
  pm_frame_run_check(L, run_offset);
  check.ok = 0;
  pm_frame_run_check(L, run_check);
  return check.ok;
}

/* }====================================================== */
