// The Go oracle of the real-history benchmark: go/ast, no tree-sitter.
//
// Reads file paths, one a line, on standard input; writes one JSON object a line:
// {"file": PATH, "defs": [...], "decls": [...], "error": "..."}.
// defs: functions and methods (Type.method), and type declarations, with 1-based
// inclusive lines (doc comments left out). decls: package-level consts and vars and
// struct fields, by name (Type.Field for fields), with their first and last lines.
package main

import (
	"bufio"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
)

type def struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

type decl struct {
	Name string `json:"name"`
	Line int    `json:"line"`
	End  int    `json:"end"`
}

type result struct {
	File  string `json:"file"`
	Defs  []def  `json:"defs"`
	Decls []decl `json:"decls"`
	Error string `json:"error,omitempty"`
}

func receiver(expr ast.Expr) string {
	switch t := expr.(type) {
	case *ast.StarExpr:
		return receiver(t.X)
	case *ast.IndexExpr:
		return receiver(t.X)
	case *ast.IndexListExpr:
		return receiver(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}

func main() {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		path := in.Text()
		res := result{File: path, Defs: []def{}, Decls: []decl{}}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			res.Error = err.Error()
		}
		line := func(p token.Pos) int { return fset.Position(p).Line }
		if file != nil {
			for _, d := range file.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					name := d.Name.Name
					if d.Recv != nil && len(d.Recv.List) > 0 {
						name = receiver(d.Recv.List[0].Type) + "." + name
					}
					res.Defs = append(res.Defs, def{name, "function", line(d.Pos()), line(d.End())})
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							start, end := line(s.Pos()), line(s.End())
							if !d.Lparen.IsValid() {
								start, end = line(d.Pos()), line(d.End())
							}
							res.Defs = append(res.Defs, def{s.Name.Name, "type", start, end})
							if st, ok := s.Type.(*ast.StructType); ok && st.Fields != nil {
								for _, f := range st.Fields.List {
									if len(f.Names) == 1 {
										res.Decls = append(res.Decls, decl{s.Name.Name + "." + f.Names[0].Name, line(f.Pos()), line(f.End())})
									}
								}
							}
						case *ast.ValueSpec:
							if len(s.Names) == 1 {
								res.Decls = append(res.Decls, decl{s.Names[0].Name, line(s.Pos()), line(s.End())})
							}
						}
					}
				}
			}
		}
		enc.Encode(res)
	}
}
