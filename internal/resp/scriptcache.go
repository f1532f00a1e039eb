package resp

import (
	"container/list"
	"sync"

	lua "github.com/yuin/gopher-lua"
)

// The script cache: each script EVAL ran or SCRIPT LOAD loaded, compiled,
// by its SHA-1, for EVALSHA. It is the node's (a client that loads a
// script through one node and calls EVALSHA through another gets
// NOSCRIPT, which Redis client libraries answer by sending the script
// again) and bounded: past Config.ScriptCacheBytes the scripts used least
// recently are dropped, and EVALSHA of one answers NOSCRIPT the same way.
// A script's size is its source plus an estimate of its compiled form.

// script is a compiled script.
type script struct {
	sha   string
	proto *lua.FunctionProto
	// shebanged: it starts with "#!lua": Redis 7's scripts, which
	// declare no-writes (readOnly) to run as EVAL_RO.
	shebanged, readOnly bool
	size                int
}

type scriptCache struct {
	mu    sync.Mutex
	limit int
	bytes int
	bySHA map[string]*list.Element // of *script
	lru   list.List                // front: used most recently
}

func newScriptCache(limit int) *scriptCache {
	return &scriptCache{limit: limit, bySHA: map[string]*list.Element{}}
}

// get returns the script with this SHA-1 (lower case), if cached.
func (c *scriptCache) get(sha string) *script {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.bySHA[sha]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*script)
}

// put caches s, dropping the least recently used scripts past the limit;
// a script larger than the whole limit is not kept.
func (c *scriptCache) put(s *script) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.bySHA[s.sha]; ok || s.size > c.limit {
		return
	}
	c.bySHA[s.sha] = c.lru.PushFront(s)
	c.bytes += s.size
	for c.bytes > c.limit {
		e := c.lru.Back()
		old := e.Value.(*script)
		c.lru.Remove(e)
		delete(c.bySHA, old.sha)
		c.bytes -= old.size
	}
}

// stats are the scripts cached and their size (INFO).
func (c *scriptCache) stats() (n, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bySHA), c.bytes
}

// flush drops every script.
func (c *scriptCache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bySHA = map[string]*list.Element{}
	c.lru.Init()
	c.bytes = 0
}

// protoSize estimates the bytes a compiled function and those it defines
// hold: instructions, line numbers, constants and names.
func protoSize(p *lua.FunctionProto) int {
	n := 128 + 4*len(p.Code) + 8*len(p.DbgSourcePositions) + 32*len(p.Constants)
	for _, k := range p.Constants {
		if s, ok := k.(lua.LString); ok {
			n += len(s)
		}
	}
	for _, f := range p.FunctionPrototypes {
		n += protoSize(f)
	}
	return n
}
