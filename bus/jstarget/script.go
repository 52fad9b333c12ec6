// Package jstarget runs a tenant's JavaScript (the bus's script target) in a
// sandbox whose limits are enforced by the operating system, not by trust in
// the interpreter.
//
// goja, the interpreter, has no memory accounting: one 'x'.repeat(2**31)
// takes down the process that runs it. So scripts never run in the engine's
// process. A [Runner] keeps a pool of child processes (the same binary,
// re-executed with [ChildEnv] set; its main or TestMain calls [ServeChild]
// first). Each child lowers its own RLIMIT_AS before it runs any script, so
// an allocation past the cap fails inside the child, the child dies, and the
// runner reports a resource error and starts a fresh child for the next
// script. The engine never dies with it.
//
// Enforced, per execution:
//   - Memory: the child's address space is capped at its baseline (measured
//     from /proc/self/status at start, before any script) plus
//     [Config].MemoryLimit (default 128 MiB) plus 64 MiB of slack for the
//     interpreter and Go runtime. A soft GC goal (debug.SetMemoryLimit) makes
//     the collector work hard before the wall is reached. Hitting the wall
//     kills the child: the error kind is "resource".
//   - Time: the child interrupts the interpreter at the timeout (default
//     30 s); if the child has not answered one second later (a built-in
//     function stuck in native code) the parent kills it. Kind "timeout".
//   - Stack: at most 10,000 nested JavaScript calls; deeper recursion is a
//     "resource" error and the child survives.
//   - Isolation: a fresh goja Runtime per execution, so nothing a script puts
//     on globalThis survives to the next one; ctx.event and ctx.tenant are
//     deep-frozen copies decoded from JSON in the child, so a script can
//     change neither the stored event nor anything outside its own run; no
//     require, no process, no file system or network: the only host objects
//     are log(...) (captured and returned) and PermanentError.
package jstarget

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dop251/goja"
	jsast "github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// wrapPrefix turns the script into a function body, so that `return x`
// records x. It sits on the script's first line so that line numbers in
// errors are the script's own; only columns on line 1 shift, and
// [Compile] subtracts the shift.
const (
	wrapPrefix = "(function (ctx, log, PermanentError) {"
	wrapSuffix = "\n})"
)

// Script is a compiled script. It is safe for concurrent use.
type Script struct {
	Name   string
	Source string
}

// SyntaxError is returned by [Compile] for source that does not parse.
// Line and Column start at 1 and refer to the script as written.
type SyntaxError struct {
	Line, Column int
	Message      string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("script syntax error at line %d, column %d: %s", e.Line, e.Column, e.Message)
}

// Compile checks that source is a valid script body (strict mode; `return`
// gives the result) and returns it ready to run. A source that does not parse
// yields a *SyntaxError; nothing else is returned as an error.
func Compile(name, source string) (*Script, error) {
	if _, err := compile(name, source); err != nil {
		return nil, err
	}
	return &Script{Name: name, Source: source}, nil
}

func compile(name, source string) (*goja.Program, error) {
	ast, err := parser.ParseFile(nil, name, wrapPrefix+source+wrapSuffix, 0)
	if err != nil {
		return nil, syntaxError(source, err)
	}
	// The source must stay inside the wrapper: `}); (function(){` parses,
	// but would swap the function the runner calls for the script's own.
	if len(ast.Body) != 1 {
		return nil, &SyntaxError{Line: 1, Column: 1, Message: "the script closes its enclosing function"}
	}
	if st, ok := ast.Body[0].(*jsast.ExpressionStatement); !ok {
		return nil, &SyntaxError{Line: 1, Column: 1, Message: "the script closes its enclosing function"}
	} else if _, ok := st.Expression.(*jsast.FunctionLiteral); !ok {
		return nil, &SyntaxError{Line: 1, Column: 1, Message: "the script closes its enclosing function"}
	}
	prg, err := goja.CompileAST(ast, true)
	if err != nil {
		return nil, syntaxError(source, err)
	}
	return prg, nil
}

func syntaxError(source string, err error) *SyntaxError {
	line, col, msg := 0, 0, err.Error()
	var list parser.ErrorList
	var perr *parser.Error
	var cerr *goja.CompilerSyntaxError
	switch {
	case errors.As(err, &list) && len(list) > 0:
		line, col, msg = list[0].Position.Line, list[0].Position.Column, list[0].Message
	case errors.As(err, &perr):
		line, col, msg = perr.Position.Line, perr.Position.Column, perr.Message
	case errors.As(err, &cerr):
		msg = cerr.Message
		if cerr.File != nil {
			p := cerr.File.Position(cerr.Offset)
			line, col = p.Line, p.Column
		}
	}
	if line == 1 {
		col -= len(wrapPrefix)
		if col < 1 {
			col = 1
		}
	}
	// The suffix's closing line is not the author's; an error there means
	// the script ended early, which the author sees as its last line.
	if last := strings.Count(source, "\n") + 1; line > last {
		line = last
		col = len(source) - strings.LastIndex(source, "\n")
	}
	return &SyntaxError{Line: line, Column: col, Message: msg}
}
