/*
** proto.h -- which chunk a Lua function comes from, exactly.
**
** Lua names no chunk: the public API gives a function's source name, which
** two loads of one file share when the name is short (Lua interns it), and
** which all stripped code shares ("=?").  In Lua 5.4 a Lua closure points to
** its prototype and each prototype to those of the functions defined in it:
** the root of that tree is the chunk, one per load.  This leans on Lua's
** private layout (LClosure and Proto, which are the same from 5.4.0 to
** 5.4.7), so pm_proto_verify checks it against the public API when perfmon
** starts, and perfmon names chunks by source alone if anything differs.
*/
#ifndef PM_PROTO_H
#define PM_PROTO_H

#include <lua.h>

/* The prototype of the Lua function whose address (lua_topointer) is f. */
const void *pm_proto_of (const void *f);

/* Whether p is a chunk's main function's: the root of a tree. */
int pm_proto_is_main (const void *p);
/* The TString of p's source name (lua_Debug.source less the string
** offset), which every prototype of a load shares; NULL for stripped code
** (lua_Debug.source "=?"). */
const void *pm_proto_source (const void *p);

/* Calls fn(p, arg) for root and every prototype below it, root first;
** stops at the first call that returns 0 and returns 0, else 1. */
int pm_proto_walk (const void *root, int (*fn)(const void *p, void *arg),
                   void *arg);

/* The table in the _ENV upvalue of the Lua function f (by its name, or
** upvalue 1 of a main function, which is _ENV even stripped), or NULL. */
const void *pm_proto_env (const void *f, size_t offset);

/* The upvalue (from 1) of the stripped Lua function f, of no known tree,
** that holds the environment of its load.  A load sets upvalue 1 of the
** function it makes; a function defined in a main function reads _ENV
** through the upvalue that came down from the main function's upvalue 1
** (its descriptor: not in the parent's stack, the parent's upvalue 0),
** and that one is taken where it holds a table: in a function whose main
** function died unseen (a function loaded alone has nothing there).  So
** exact for both, but a guess for a function defined deeper. */
int pm_proto_load_env (const void *f);
/* The table in that upvalue of f that came down from its parent's upvalue
** 0, or NULL: for a stripped function of no known tree, whose parent was
** the main function, its _ENV. */
const void *pm_proto_passed_env (const void *f);

/* The identity of upvalue i (from 0) of the Lua function f, as
** lua_upvalueid gives it (its UpVal), or NULL past the last. */
const void *pm_proto_upvalue (const void *f, int i);

/* Calls fn(obj, proto, arg) for every prototype (proto 1) and Lua function
** (proto 0) alive in L's universe, by the list of all its objects (in
** global_State), finishing a collection first if one is sweeping; stops at
** the first call that returns 0 and returns 0, else 1.  fn must not
** allocate through Lua.  Only when pm_proto_heap_verify said yes. */
int pm_proto_heap (lua_State *L,
                   int (*fn)(const void *obj, int proto, void *arg), void *arg);

/* Calls fn(co, arg) for every thread alive in L's universe but the main
** one, by the same list; fn must not allocate through Lua.  Only when
** pm_proto_heap_verify said yes. */
void pm_proto_threads (lua_State *L, void (*fn)(lua_State *co, void *arg),
                       void *arg);

/* Loads and runs a chunk with nested functions; returns whether the
** prototypes read through the private layout agree with lua_getinfo
** (parameters, lines, source) and with each other (a closure's prototype is
** the one in its parent's list).  Raises only a memory error. */
int pm_proto_verify (lua_State *L);

/* Checks global_State's allocator, registry and list of all objects (a
** function's and a thread's place in it), and a Lua function's upvalues
** (their values and identities), against the public API; after
** pm_proto_verify. */
int pm_proto_heap_verify (lua_State *L);

#endif
