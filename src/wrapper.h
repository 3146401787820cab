/*
** wrapper.h -- a plugin's wrapper of a library's function.
**
** Hosts are extended by wrapping: a plugin keeps a library's function F
** (RootView.draw), puts its own W in its place, and W calls F.  The
** library's call of W, then W's of F, looks like a plugin calling the
** library's API, whose time is the plugin's self time (context.h); but F
** is the library's own work, which it would do without the plugin.  W
** wraps F when W holds F in an upvalue and the names they were called by
** are one, or one is the other with a prefix or a suffix joined by '_'
** (`draw`, `old_draw`, `draw_orig`; a wrapper of a wrapper is called by
** the name its wrapper keeps it under): then F's time stays the
** library's.  Answers are cached by the pair of functions, and forgotten
** when either is freed, or when every resolution of a function goes
** (after which frees are no longer seen).
*/
#ifndef PM_WRAPPER_H
#define PM_WRAPPER_H

#include "state.h"

/* Whether the function of frame w (a plugin's) wraps that of frame f (a
** library's), which w called: both frames of L, by their i_ci. */
int pm_wraps (pm_State *S, lua_State *L, lua_Debug *f, lua_Debug *w);
/* A function was freed: answers naming it go. */
void pm_wrapper_forget (pm_State *S, const void *fn);

#endif
