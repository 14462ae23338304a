// The Java oracle of the real-history benchmark: the JDK's own parser (javac's tree
// API, parse only), no tree-sitter.
//
// usage: java JavaOracle.java LIST_FILE   (LIST_FILE: one source path a line)
// Writes one JSON object a line: {"file", "defs": [{name, kind, start, end}],
// "decls": [{name, line}]}, 1-based lines. defs: classes, interfaces, enums, records
// (qualified by their outer classes), methods and constructors (Class.name(ParamTypes),
// so that overloads differ); a span starts at the modifiers (annotations included,
// javadoc not). decls: fields and enum constants (Class.NAME), first and last line.
import com.sun.source.tree.*;
import com.sun.source.util.*;
import javax.tools.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class JavaOracle {
    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        List<String> paths = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
        JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        StandardJavaFileManager fm = compiler.getStandardFileManager(null, null, StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        for (String path : paths) {
            if (path.isEmpty()) continue;
            List<String> defs = new ArrayList<>();
            List<String> decls = new ArrayList<>();
            String error = null;
            try {
                JavacTask task = (JavacTask) compiler.getTask(null, fm, d -> {}, List.of("-proc:none"), null,
                        fm.getJavaFileObjects(path));
                SourcePositions sp = Trees.instance(task).getSourcePositions();
                for (CompilationUnitTree unit : task.parse()) {
                    LineMap lines = unit.getLineMap();
                    new TreeScanner<Void, String>() {
                        long line(Tree t, boolean end) {
                            long pos = end ? sp.getEndPosition(unit, t) : sp.getStartPosition(unit, t);
                            return pos < 0 ? -1 : lines.getLineNumber(end ? Math.max(pos - 1, 0) : pos);
                        }
                        void def(String name, String kind, Tree t) {
                            long s = line(t, false), e = line(t, true);
                            if (s > 0 && e >= s)
                                defs.add("{\"name\":" + quote(name) + ",\"kind\":\"" + kind + "\",\"start\":" + s + ",\"end\":" + e + "}");
                        }
                        @Override public Void visitClass(ClassTree t, String scope) {
                            String name = t.getSimpleName().toString();
                            if (name.isEmpty()) return super.visitClass(t, scope);  // anonymous
                            String full = scope == null ? name : scope + "." + name;
                            def(full, "class", t);
                            for (Tree m : t.getMembers()) scan(m, full);
                            return null;
                        }
                        @Override public Void visitMethod(MethodTree t, String scope) {
                            String name = t.getName().toString();
                            if (name.equals("<init>")) name = scope == null ? name : scope.substring(scope.lastIndexOf('.') + 1);
                            StringBuilder params = new StringBuilder();
                            for (VariableTree p : t.getParameters()) {
                                if (params.length() > 0) params.append(",");
                                params.append(p.getType() == null ? "?" : p.getType().toString().replaceAll("\\s+", ""));
                            }
                            String full = (scope == null ? "" : scope + ".") + name + "(" + params + ")";
                            def(full, "function", t);
                            return super.visitMethod(t, full);
                        }
                        @Override public Void visitVariable(VariableTree t, String scope) {
                            // fields only: variables whose scope is a class (not a method)
                            if (scope != null && !scope.endsWith(")")) {
                                long s = line(t, false), e = line(t, true);
                                if (s > 0 && e >= s)
                                    decls.add("{\"name\":" + quote(scope + "." + t.getName()) + ",\"line\":" + s + ",\"end\":" + e + "}");
                            }
                            return super.visitVariable(t, scope);
                        }
                        @Override public Void visitNewClass(NewClassTree t, String scope) {
                            // anonymous classes: their members belong to no named class
                            scan(t.getArguments(), scope);
                            return null;
                        }
                        @Override public Void visitLambdaExpression(LambdaExpressionTree t, String scope) {
                            return null;
                        }
                    }.scan(unit, null);
                }
            } catch (Throwable e) {
                error = e.toString();
            }
            out.append("{\"file\":").append(quote(path)).append(",\"defs\":[").append(String.join(",", defs))
               .append("],\"decls\":[").append(String.join(",", decls)).append("]");
            if (error != null) out.append(",\"error\":").append(quote(error));
            out.append("}\n");
            if (out.length() > 1 << 16) { System.out.print(out); out.setLength(0); }
        }
        System.out.print(out);
        System.out.flush();
    }
}
