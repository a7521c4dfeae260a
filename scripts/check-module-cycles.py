#!/usr/bin/env python3
"""Fails when modules of one crate import each other in a cycle.

For every crate under crates/, every module's `crate::` and `super::` paths
(comments and `#[cfg(test)] mod tests` left out) give edges between sibling
modules; a strongly connected group of two or more siblings is a cycle.
ARCHITECTURE.md promises none; scripts/test.sh runs this.
"""
import os,re,sys,collections
def modpath(src, f):
    rel=os.path.relpath(f,src)[:-3].split('/')
    if rel[-1] in ('lib','main','mod'): rel=rel[:-1]
    return rel
def scc(nodes, edges):
    idx={};low={};st=[];on=set();out=[];c=[0]
    def strong(v):
        idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
        for w in edges.get(v,()):
            if w not in idx: strong(w);low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],idx[w])
        if low[v]==idx[v]:
            comp=[]
            while True:
                w=st.pop();on.discard(w);comp.append(w)
                if w==v:break
            out.append(comp)
    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in idx: strong(v)
    return [c for c in out if len(c)>1]
bad=0
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
for crate in sorted(os.listdir('crates')):
    src=f'crates/{crate}/src'
    if not os.path.isdir(src): continue
    files=[os.path.join(d,f) for d,_,fs in os.walk(src) for f in fs if f.endswith('.rs')]
    mods={tuple(modpath(src,f)):f for f in files}
    edges=collections.defaultdict(set)
    for m,f in mods.items():
        text=open(f).read()
        # strip cfg(test) mod tests blocks crudely: cut from '#[cfg(test)]\nmod tests' to end
        text=re.sub(r"//[^\n]*","",text)
        i=text.find('#[cfg(test)]\nmod tests')
        if i>=0: text=text[:i]
        refs=set()
        for mm in re.finditer(r'\bcrate((?:::[a-z_][a-z0-9_]*)+)',text):
            refs.add(tuple(mm.group(1).split('::')[1:]))
        for mm in re.finditer(r'\b((?:super::)+)((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)',text):
            ups=mm.group(1).count('super')
            base=list(m[:len(m)-ups]) if ups<=len(m) else []
            refs.add(tuple(base+mm.group(2).split('::')))
        # use crate::{a, b::{..}} grouped
        for mm in re.finditer(r'use crate::\{([^;]*)\};',text,re.S):
            for part in re.findall(r'(?:^|[,{]\s*)([a-z_][a-z0-9_]*)',mm.group(1)):
                refs.add((part,))
        for r in refs:
            # longest existing module prefix
            for k in range(len(r),0,-1):
                if r[:k] in mods: edges[m].add(r[:k]); break
    # check at each parent level: siblings graph
    parents=set(m[:-1] for m in mods if m)
    for p in parents:
        kids=set(m[len(p)] for m in mods if len(m)>len(p) and m[:len(p)]==p)
        g=collections.defaultdict(set)
        for a,bs in edges.items():
            if len(a)>len(p) and a[:len(p)]==p:
                for b in bs:
                    if len(b)>len(p) and b[:len(p)]==p and b[len(p)]!=a[len(p)]:
                        g[a[len(p)]].add(b[len(p)])
        for comp in scc(sorted(kids),g):
            bad+=1
            print(crate,'::'.join(p) or '<root>','cycle:',sorted(comp))
            for a in comp:
                print('   ',a,'->',sorted(g[a]&set(comp)))
if bad:
    print('module cycles found: break each by moving the shared item into a leaf module')
sys.exit(1 if bad else 0)
