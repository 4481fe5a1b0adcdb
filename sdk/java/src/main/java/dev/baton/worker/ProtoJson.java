package dev.baton.worker;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.MessageOrBuilder;
import com.google.protobuf.util.JsonFormat;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The REST bodies are the proto3 JSON mapping of {@code engine.proto}'s messages: this converts
 * between the generated classes ({@code dev.baton.workflow.v1}) and Jackson trees.
 *
 * <p>Reading ignores fields this SDK's copy of the proto does not know (a newer server), so an
 * added field never breaks an older worker.
 */
public final class ProtoJson {
  private static final JsonFormat.Printer PRINTER = JsonFormat.printer().omittingInsignificantWhitespace();
  private static final JsonFormat.Parser PARSER = JsonFormat.parser().ignoringUnknownFields();
  private static final JsonFormat.Parser STRICT = JsonFormat.parser();

  private ProtoJson() {}

  /**
   * A message as its proto3 JSON (lowerCamelCase names, defaults left out). A {@code Struct} keeps
   * every number as a double, which the printer writes as {@code 2.0}; whole numbers are written
   * {@code 2} here, as JSON (and the server) reads them: the same number either way.
   */
  public static ObjectNode toJson(MessageOrBuilder message) {
    try {
      ObjectNode json = (ObjectNode) wholeNumbers(ApiHttp.JSON.readTree(PRINTER.print(message)));
      foldLegacy(message.getDescriptorForType(), json, true);
      return json;
    } catch (InvalidProtocolBufferException | JsonProcessingException e) {
      throw new IllegalArgumentException("cannot print " + message.getClass().getSimpleName(), e);
    }
  }

  private static final String LEGACY = "legacy_";

  /**
   * Keeps each deprecated {@code legacy_<name>} field out of REST JSON. Such a field holds, under
   * its old number and narrower type, a value whose field {@code <name>} widened (a step's input,
   * a Struct, became a Value as it may be one {@code ${...}}): the engine sets both, an engine
   * older than this proto only the old one, whose value then stands for {@code <name>} (as it
   * does when code sets the deprecated field). With {@code deep}, the messages within too.
   */
  static void foldLegacy(Descriptor type, ObjectNode json, boolean deep) {
    if (deep) {
      for (FieldDescriptor field : type.getFields()) {
        if (field.getJavaType() != FieldDescriptor.JavaType.MESSAGE || field.isMapField()
            || field.getMessageType().getFullName().startsWith("google.protobuf.")) {
          continue;
        }
        JsonNode child = json.get(field.getJsonName());
        if (child != null && child.isObject()) {
          foldLegacy(field.getMessageType(), (ObjectNode) child, true);
        } else if (child != null && child.isArray()) {
          for (JsonNode item : child) {
            if (item.isObject()) {
              foldLegacy(field.getMessageType(), (ObjectNode) item, true);
            }
          }
        }
      }
    }
    for (FieldDescriptor[] pair : legacyPairs(type)) {
      JsonNode value = json.remove(pair[0].getJsonName());
      if (value != null && !json.has(pair[1].getJsonName())) {
        json.set(pair[1].getJsonName(), value);
      }
    }
  }

  /** Each message type's legacy fields with the fields they stand for, found once per type. */
  private static final Map<Descriptor, List<FieldDescriptor[]>> LEGACY_PAIRS = new ConcurrentHashMap<>();

  private static List<FieldDescriptor[]> legacyPairs(Descriptor type) {
    return LEGACY_PAIRS.computeIfAbsent(type, t -> {
      List<FieldDescriptor[]> pairs = new ArrayList<>();
      for (FieldDescriptor field : t.getFields()) {
        String name = field.getName();
        if (name.startsWith(LEGACY) && field.getOptions().getDeprecated()) {
          FieldDescriptor next = t.findFieldByName(name.substring(LEGACY.length()));
          if (next != null) {
            pairs.add(new FieldDescriptor[] {field, next});
          }
        }
      }
      return List.copyOf(pairs);
    });
  }

  private static final double EXACT = 9007199254740992.0; // 2^53: beyond it doubles skip integers

  private static JsonNode wholeNumbers(JsonNode node) {
    if (node.isDouble()) {
      double d = node.doubleValue();
      if (d == Math.rint(d) && Math.abs(d) < EXACT && !(d == 0 && 1 / d < 0)) {
        long whole = (long) d; // int-sized as IntNode, as Jackson reads such a number
        return whole == (int) whole
            ? ApiHttp.JSON.getNodeFactory().numberNode((int) whole)
            : ApiHttp.JSON.getNodeFactory().numberNode(whole);
      }
      return node;
    }
    if (node.isObject()) {
      ObjectNode object = (ObjectNode) node;
      object.properties().forEach(e -> e.setValue(wholeNumbers(e.getValue())));
    } else if (node.isArray()) {
      for (int i = 0; i < node.size(); i++) {
        ((com.fasterxml.jackson.databind.node.ArrayNode) node).set(i, wholeNumbers(node.get(i)));
      }
    }
    return node;
  }

  /** Fills {@code builder} from proto3 JSON; unknown fields are ignored. */
  public static <B extends Message.Builder> B merge(JsonNode json, B builder) {
    return merge(json, builder, false);
  }

  /** As {@link #merge(JsonNode, Message.Builder)}; {@code strict} refuses unknown fields. */
  public static <B extends Message.Builder> B merge(JsonNode json, B builder, boolean strict) {
    try {
      (strict ? STRICT : PARSER).merge(ApiHttp.JSON.writeValueAsString(json), builder);
      return builder;
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "not a " + builder.getDescriptorForType().getName() + ": " + e.getMessage(), e);
    }
  }

  /** Parses proto3 JSON text into {@code builder}; unknown fields are ignored. */
  public static <B extends Message.Builder> B merge(String json, B builder) {
    try {
      PARSER.merge(json, builder);
      return builder;
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalArgumentException(
          "not a " + builder.getDescriptorForType().getName() + ": " + e.getMessage(), e);
    }
  }
}
