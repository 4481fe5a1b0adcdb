package dev.baton.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Iterator;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * What a handler may return: a map of variables (or null) that encodes as strict JSON Baton can
 * store. A result that breaks these rules is a bug in the handler: retrying cannot help, so the
 * runner fails the job at once, saying where the problem is. The output a {@link JobException}
 * carries is held to the same rules (one that breaks them is left out of the failure).
 */
final class Results {
  private static final Pattern IDENTIFIER = Pattern.compile("^[A-Za-z_][A-Za-z0-9_]*$");

  private Results() {}

  /** The result as a JSON tree, or a {@link Problem} saying why it cannot be sent. */
  static JsonNode toJson(Map<String, ?> result) {
    return toJson(result, "the handler's result");
  }

  /**
   * {@code value} (what: e.g. "the handler's result", "the failure's output") as a JSON tree, or a
   * {@link Problem} saying why it cannot be sent.
   */
  static JsonNode toJson(Map<String, ?> value, String what) {
    JsonNode tree;
    try {
      tree = ApiHttp.JSON.valueToTree(value);
    } catch (IllegalArgumentException e) {
      Throwable cause = e.getCause() == null ? e : e.getCause();
      throw new Problem(what + " cannot be sent: it does not serialise to JSON ("
          + cause.getMessage() + ")");
    } catch (StackOverflowError e) {
      throw new Problem(what + " cannot be sent: it is nested too deeply (or contains itself)");
    }
    String problem = find(tree, "$");
    if (problem != null) {
      throw new Problem(what + " cannot be sent: " + problem);
    }
    return tree;
  }

  /** Why a result cannot be sent. */
  static final class Problem extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Problem(String message) {
      super(message, null, false, false);
    }
  }

  private static String find(JsonNode value, String path) {
    if (value.isFloatingPointNumber()) {
      double d = value.doubleValue();
      if (Double.isNaN(d)) {
        return path + " is NaN, which is not JSON";
      }
      if (Double.isInfinite(d)) {
        return path + " is " + (d < 0 ? "-" : "") + "Infinity, which is not JSON";
      }
      return null;
    }
    if (value.isTextual()) {
      return textProblem(value.textValue(), path);
    }
    if (value.isArray()) {
      for (int i = 0; i < value.size(); i++) {
        String p = find(value.get(i), path + "[" + i + "]");
        if (p != null) {
          return p;
        }
      }
      return null;
    }
    if (value.isObject()) {
      Iterator<Map.Entry<String, JsonNode>> fields = value.properties().iterator();
      while (fields.hasNext()) {
        Map.Entry<String, JsonNode> e = fields.next();
        String p = textProblem(e.getKey(), "a key of " + path);
        if (p == null) {
          p = find(e.getValue(), member(path, e.getKey()));
        }
        if (p != null) {
          return p;
        }
      }
      return null;
    }
    if (value.isPojo()) {
      return path + " is a " + value.getClass().getSimpleName() + ", which is not JSON";
    }
    return null;
  }

  private static String textProblem(String text, String where) {
    if (text.indexOf('\0') >= 0) {
      return where + " contains a NUL character (\\u0000), which Baton cannot store";
    }
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
          i++;
          continue;
        }
        return where + " contains a lone surrogate, which is not UTF-8";
      }
      if (Character.isLowSurrogate(c)) {
        return where + " contains a lone surrogate, which is not UTF-8";
      }
    }
    return null;
  }

  private static String member(String path, String key) {
    if (IDENTIFIER.matcher(key).matches()) {
      return path + "." + key;
    }
    return path + "[\"" + key.replace("\\", "\\\\").replace("\"", "\\\"") + "\"]";
  }
}
