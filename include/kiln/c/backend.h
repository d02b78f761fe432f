/*
 * Kiln backend plugin ABI.
 *
 * A backend is a shared library built against this header only. It exports
 * one symbol, kiln_backend_entry (KILN_BACKEND_ENTRY_SYMBOL). The host (the
 * Kiln runtime, or `kiln check-backend`) loads the library, calls the entry
 * with its own function table and the range of ABI versions it speaks, and
 * gets back the plugin's function table and a plugin object.
 *
 * Lifecycle, as the host drives it:
 *
 *   entry -> plugin_get_info -> plugin_is_available -> devices, option schema
 *         -> instance_create(options) -> set/get property
 *         -> instance_get_capability(graph view) -> instance_compile(group)
 *         -> compiled_execute (many times, maybe concurrently)
 *         -> compiled_export / plugin_check_compiled / instance_import
 *         -> compiled_release -> instance_release -> plugin_release -> unload
 *
 * Device plugins (\since 1.1, all opt-in): a compiled handle declares the
 * memory kind of each input and output and its scratch per kind
 * (kiln_compiled_info_t); the host then plans device buffers with
 * instance_alloc, keeps an edge between two partitions of one instance on
 * the device, stages edges to portable kernels through pinned memory with
 * instance_copy (one copy each way), and, for KILN_COMPILED_ASYNC handles,
 * enqueues compiled_execute_async behind timeline fences (kiln_fence_t),
 * waiting only where a portable kernel or the caller needs the data.
 *
 * Rules that hold for every call (written once here):
 *
 *  - Plain C. This header includes only stdint.h, stddef.h and stdbool.h and
 *    compiles as C11 and as C++. No exception may cross the boundary in
 *    either direction: every host function and every plugin entry returns.
 *  - Versioning. Every function table and every growable struct begins with
 *    a kiln_abi_header_t or a struct_size. Tables only grow at the end; the
 *    offsets of existing members never change within a major version (the
 *    tests pin them with offsetof). The host refuses a plugin whose major
 *    differs from its own, with a message naming both versions. A minor
 *    difference works both ways: each side reads only the members that fit
 *    inside the other side's struct_size and treats the rest as NULL / 0.
 *  - Zero means 1.0. In every struct the host passes to a plugin (in or
 *    out), a member appended after 1.0 that is zero (or NULL) asks for
 *    exactly the 1.0 behaviour, and a plugin that leaves an appended member
 *    of an out struct at zero gets exactly the 1.0 behaviour from the host.
 *    So a 1.0 plugin, which never reads or writes appended members, keeps
 *    working unchanged, and new behaviour is always opted into with a
 *    non-zero value. Every member added after 1.0 says "\since 1.x" and
 *    what its zero means.
 *  - Structs passed for the callee to fill ("out" structs) are zeroed by the
 *    caller, which sets struct_size to its own sizeof; the callee writes only
 *    members that lie entirely within struct_size.
 *  - Errors. Functions that can fail return kiln_status_t*: NULL means
 *    success; otherwise a status made with kiln_host_api_t.status_create,
 *    whose ownership passes to the caller. A failed call leaves no object
 *    for the caller to release and no state changed in the callee. After a
 *    failure the caller ignores every out-parameter, with one exception:
 *    arrays and strings the callee stored in an out struct or out-pointer
 *    before failing (kiln_capability_t, instance_get_property,
 *    compiled_export) are host-allocated and the host frees them, so a
 *    callee may fill them as it goes and fail half way without leaking.
 *    Callees should still leave handle out-parameters (out_instance,
 *    out_compiled, out_plugin) untouched on failure.
 *  - Ownership. Objects a create function returns are owned by the caller
 *    and freed with the matching release function; every release returns void
 *    and accepts NULL. Every array or string a plugin returns to the host is
 *    allocated with kiln_host_api_t.alloc and freed by the host. Descriptive
 *    strings (names, versions, docs) in info structs are borrowed from the
 *    plugin and stay valid until plugin_release. Everything the host hands to
 *    the plugin (graph views, tensor views, option strings) is borrowed and
 *    valid only for the duration of the call that received it.
 *  - Threads. Plugin-level and instance-level functions may be called from
 *    any thread but never concurrently on one object. compiled_execute may be
 *    called concurrently on one compiled handle only if the handle declares
 *    KILN_CONCURRENCY_REENTRANT; otherwise the host serializes those calls.
 *  - Names of C functions read as kiln_<object>_<verb>; out-parameters are
 *    named out_* and come last.
 *  - Enum values cross the ABI as int32_t, in struct members and in
 *    parameters alike (the enum types name the meaning), so that either side
 *    can reject a value it does not know without undefined behaviour.
 *
 * \since 1.0 for everything in this file unless noted.
 */
#ifndef KILN_C_BACKEND_H_
#define KILN_C_BACKEND_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions and export                                                      */
/* ------------------------------------------------------------------------ */

/** ABI major version: a change here is incompatible; the host refuses it. */
#define KILN_BACKEND_ABI_MAJOR 1
/** ABI minor version: grows when members are appended to tables. */
#define KILN_BACKEND_ABI_MINOR 1

/** The one symbol a plugin library exports (a kiln_backend_entry_fn). */
#define KILN_BACKEND_ENTRY_SYMBOL "kiln_backend_entry"

/** Marks the entry function as exported from the shared library. */
#if defined(_WIN32)
#define KILN_BACKEND_EXPORT __declspec(dllexport)
#else
#define KILN_BACKEND_EXPORT __attribute__((visibility("default")))
#endif

/**
 * First member of every function table: the size of the table in bytes and
 * the ABI version its author compiled against.
 */
typedef struct kiln_abi_header {
  uint32_t struct_size; /**< sizeof the table as its author compiled it */
  uint16_t abi_major;   /**< KILN_BACKEND_ABI_MAJOR of its author */
  uint16_t abi_minor;   /**< KILN_BACKEND_ABI_MINOR of its author */
} kiln_abi_header_t;

/* ------------------------------------------------------------------------ */
/* Enums (values are stable; new values may be added)                       */
/* ------------------------------------------------------------------------ */

/** Status codes; the same values as kiln::StatusCode. */
typedef enum kiln_status_code {
  KILN_STATUS_OK = 0,
  KILN_STATUS_INVALID_ARGUMENT = 1,    /**< bad input: option, shape, dtype, bytes */
  KILN_STATUS_NOT_FOUND = 2,           /**< an unknown key, file or name */
  KILN_STATUS_UNIMPLEMENTED = 3,       /**< valid but not supported by this plugin */
  KILN_STATUS_OUT_OF_RANGE = 4,        /**< an index or size outside its bounds */
  KILN_STATUS_FAILED_PRECONDITION = 5, /**< called in the wrong state */
  KILN_STATUS_INTERNAL = 6,            /**< a bug */
  KILN_STATUS_IO = 7,                  /**< reading or writing failed */
  KILN_STATUS_UNAVAILABLE = 8,         /**< device or vendor library not usable here */
  /* \since 1.1 (a 1.0 host reports them as internal errors) */
  KILN_STATUS_CANCELLED = 9,           /**< the run was cancelled (exec_should_cancel said so) */
  KILN_STATUS_DEADLINE_EXCEEDED = 10,  /**< the run's deadline passed */
  /**
   * The device ran out of memory (or another resource) for this run. With
   * the session's fallback `allow`, the host may run the partition again on
   * portable kernels and says so.
   */
  KILN_STATUS_RESOURCE_EXHAUSTED = 11
} kiln_status_code_t;

/** Element types; the same values as ONNX TensorProto.DataType. */
typedef enum kiln_dtype {
  KILN_DTYPE_UNDEFINED = 0,
  KILN_DTYPE_FLOAT32 = 1,
  KILN_DTYPE_UINT8 = 2,
  KILN_DTYPE_INT8 = 3,
  KILN_DTYPE_UINT16 = 4,
  KILN_DTYPE_INT16 = 5,
  KILN_DTYPE_INT32 = 6,
  KILN_DTYPE_INT64 = 7,
  KILN_DTYPE_STRING = 8, /**< never crosses the ABI as data; seen only as a type */
  KILN_DTYPE_BOOL = 9,   /**< one byte per element, 0 or 1 */
  KILN_DTYPE_FLOAT16 = 10,
  KILN_DTYPE_FLOAT64 = 11,
  KILN_DTYPE_UINT32 = 12,
  KILN_DTYPE_UINT64 = 13,
  KILN_DTYPE_COMPLEX64 = 14,
  KILN_DTYPE_COMPLEX128 = 15,
  KILN_DTYPE_BFLOAT16 = 16
} kiln_dtype_t;

/** Log levels for kiln_host_api_t.log. */
typedef enum kiln_log_level {
  KILN_LOG_DEBUG = 0,
  KILN_LOG_INFO = 1,
  KILN_LOG_WARNING = 2,
  KILN_LOG_ERROR = 3
} kiln_log_level_t;

/** What flows along a graph edge (kiln_host_api_t.value_kind). */
typedef enum kiln_value_kind {
  KILN_VALUE_UNKNOWN = 0,  /**< neither the model nor shape inference says */
  KILN_VALUE_TENSOR = 1,
  KILN_VALUE_SEQUENCE = 2, /**< dtype/rank/dims describe the element tensor */
  KILN_VALUE_OPTIONAL = 3, /**< dtype/rank/dims describe the contained tensor */
  KILN_VALUE_MAP = 4
} kiln_value_kind_t;

/** Attribute types; the same values as ONNX AttributeProto.AttributeType. */
typedef enum kiln_attr_type {
  KILN_ATTR_UNDEFINED = 0,
  KILN_ATTR_FLOAT = 1,
  KILN_ATTR_INT = 2,
  KILN_ATTR_STRING = 3,
  KILN_ATTR_TENSOR = 4,
  KILN_ATTR_GRAPH = 5,
  KILN_ATTR_FLOATS = 6,
  KILN_ATTR_INTS = 7,
  KILN_ATTR_STRINGS = 8,
  KILN_ATTR_TENSORS = 9,
  KILN_ATTR_GRAPHS = 10,
  KILN_ATTR_SPARSE_TENSOR = 11,
  KILN_ATTR_SPARSE_TENSORS = 12,
  KILN_ATTR_TYPE_PROTO = 13,
  KILN_ATTR_TYPE_PROTOS = 14
} kiln_attr_type_t;

/** Types of the options a plugin publishes in its schema. */
typedef enum kiln_option_type {
  KILN_OPTION_BOOL = 0,   /**< "true"/"false"/"1"/"0" */
  KILN_OPTION_INT = 1,    /**< decimal int64 */
  KILN_OPTION_FLOAT = 2,  /**< decimal or scientific double */
  KILN_OPTION_STRING = 3  /**< any text */
} kiln_option_type_t;

/**
 * Bits of kiln_plugin_info_t.flags. \since 1.1 (a 1.0 plugin's flags read
 * as 0: the 1.0 behaviour).
 */
typedef enum kiln_plugin_flag {
  /**
   * Never unload the library (no dlclose after plugin_release): set it when
   * the plugin, or a vendor library it loads, keeps threads or registers
   * callbacks that outlive plugin_release. The host then keeps the library
   * mapped until the process exits. Without it the host unloads the library
   * once its last object is released.
   */
  KILN_PLUGIN_NO_UNLOAD = 1,
  /**
   * \since 1.1. Instances may be shared: the host may hand one instance
   * (same device, same options) to several sessions of one registry and call
   * instance_compile / instance_import on it from different threads, never
   * concurrently (the host serializes instance-level calls). Compiled handles
   * of one shared instance may then share device copies of constants with
   * the same content hash (see kiln_constant_info_t). Without it each session
   * creates its own instances.
   */
  KILN_PLUGIN_SHARED_INSTANCES = 2
} kiln_plugin_flag_t;

/** Kinds of devices. */
typedef enum kiln_device_kind {
  KILN_DEVICE_CPU = 0,
  KILN_DEVICE_GPU = 1,
  KILN_DEVICE_NPU = 2,
  KILN_DEVICE_OTHER = 3
} kiln_device_kind_t;

/** Whether compiled_execute may run concurrently on one compiled handle. */
typedef enum kiln_concurrency {
  /** One call at a time: the host serializes calls on the handle. */
  KILN_CONCURRENCY_SERIAL = 0,
  /** Any number of concurrent calls on the handle are safe. */
  KILN_CONCURRENCY_REENTRANT = 1
} kiln_concurrency_t;

/**
 * Where the bytes of a tensor live. \since 1.1; 0 (host) is the 1.0
 * behaviour: every tensor a 1.0 plugin sees is host memory.
 */
typedef enum kiln_memory_kind {
  /** Ordinary host memory (the host's memory plan). */
  KILN_MEMORY_HOST = 0,
  /**
   * Host memory the device can transfer from and to directly (page-locked).
   * The host reads and writes it; the host allocates it with instance_alloc.
   */
  KILN_MEMORY_HOST_PINNED = 1,
  /**
   * Memory of the device. The host never dereferences such a pointer: it
   * passes it back to the plugin that allocated it (execute, copy, free).
   */
  KILN_MEMORY_DEVICE = 2,
  /**
   * Device memory the host may read and write directly (unified or mapped
   * memory). Only after the work that writes it has completed (its fence).
   */
  KILN_MEMORY_DEVICE_HOST_VISIBLE = 3
} kiln_memory_kind_t;

/** Number of kiln_memory_kind_t values (sizes arrays indexed by kind). */
#define KILN_MEMORY_KIND_COUNT 4

/** Bits of kiln_compiled_info_t.flags. \since 1.1; 0 is the 1.0 behaviour. */
typedef enum kiln_compiled_flag {
  /**
   * The handle implements compiled_execute_async: the host may enqueue it
   * behind fences and wait only where the data is needed. Without it the
   * host calls compiled_execute and the call's return means done.
   */
  KILN_COMPILED_ASYNC = 1
} kiln_compiled_flag_t;

/* ------------------------------------------------------------------------ */
/* Opaque handles                                                           */
/* ------------------------------------------------------------------------ */

/** Host objects (the plugin never frees them except statuses it owns). */
typedef struct kiln_status kiln_status_t;             /**< an error */
typedef struct kiln_host kiln_host_t;                 /**< the host's context for one loaded plugin */
typedef struct kiln_graph kiln_graph_t;               /**< read-only graph view */
typedef struct kiln_node kiln_node_t;                 /**< a node of a graph view */
typedef struct kiln_value kiln_value_t;               /**< a value (edge) of a graph view */
typedef struct kiln_attribute kiln_attribute_t;       /**< a node attribute */
typedef struct kiln_exec_context kiln_exec_context_t; /**< one compiled_execute call */
/**
 * A timeline fence (\since 1.1): a 64-bit counter that only grows, with
 * waiters. Work enqueued asynchronously says it is done by signalling a
 * value; anyone waits for "at least value". The host owns fences; plugins
 * signal and wait on them through kiln_host_api_t.
 */
typedef struct kiln_fence kiln_fence_t;

/** Plugin objects (the host frees them with the plugin's release functions). */
typedef struct kiln_plugin kiln_plugin_t;     /**< the plugin, once per entry call */
typedef struct kiln_instance kiln_instance_t; /**< a configured backend on one device */
typedef struct kiln_compiled kiln_compiled_t; /**< a compiled partition */

/* ------------------------------------------------------------------------ */
/* Plain structs                                                            */
/* ------------------------------------------------------------------------ */

/**
 * A tensor view: dtype, shape and a pointer to row-major elements. Never owns
 * anything. Input views are read-only (data is const in spirit); output views
 * point into memory the plugin writes: host memory, or from 1.1 the kind the
 * compiled handle declared (memory_kind).
 */
typedef struct kiln_tensor {
  uint32_t struct_size; /**< sizeof(kiln_tensor_t) of whoever filled it */
  int32_t dtype;        /**< a kiln_dtype_t */
  size_t rank;          /**< number of dims */
  const int64_t* dims;  /**< rank entries, each >= 0 */
  void* data;           /**< the elements; may be NULL when nbytes is 0 */
  size_t nbytes;        /**< product(dims) * size of dtype */
  /**
   * \since 1.1: a kiln_memory_kind_t; 0 (host) as in 1.0. The host passes a
   * non-host tensor only to a compiled handle that declared that kind for
   * that input or output (kiln_compiled_info_t), so a 1.0 plugin only ever
   * sees host memory.
   */
  int32_t memory_kind;
  /** \since 1.1: for device kinds, which of the instance's devices (0: its first). */
  uint32_t device_index;
} kiln_tensor_t;

/** What a plugin says about itself (plugin_get_info). */
typedef struct kiln_plugin_info {
  uint32_t struct_size;
  const char* name;               /**< unique, [a-z0-9_]+, e.g. "xnnpack" */
  const char* version;            /**< the plugin's own version, e.g. "1.2.0" */
  const char* vendor;             /**< who maintains it */
  const char* vendor_sdk_version; /**< version of the vendor library it found, "" if none */
  const char* description;        /**< one line */
  /**
   * Order among plugins when the user names none: higher first. 0 means the
   * plugin is used only when the user names it.
   */
  int32_t priority;
  /** \since 1.1: kiln_plugin_flag_t bits; 0 means none (1.0 behaviour). */
  uint32_t flags;
} kiln_plugin_info_t;

/**
 * One device a plugin can run on (plugin_get_device_info). A plugin that
 * finds no device reports a count of 0 and says why from
 * plugin_is_available: it still loads, and is listed as unavailable with
 * that reason (\since 1.1; a 1.0 host refuses a count of 0).
 */
typedef struct kiln_device_info {
  uint32_t struct_size;
  const char* name;        /**< e.g. "cpu", "gpu0" */
  int32_t kind;            /**< a kiln_device_kind_t */
  const char* description; /**< one line */
  /* \since 1.1; each 0 (NULL, all-zero) means unknown, as from a 1.0 plugin. */
  uint32_t vendor_id;         /**< PCI vendor id (0x10de, 0x1002, 0x8086...) */
  uint32_t device_id;         /**< PCI device id, or the vendor's own model number */
  uint8_t uuid[16];           /**< stable across processes and reboots */
  uint64_t memory_bytes;      /**< the device's own memory; 0 also when it shares host memory */
  const char* driver_version; /**< e.g. "550.54.14"; borrowed like `name` */
} kiln_device_info_t;

/** One entry of the option schema (plugin_get_option_info). */
typedef struct kiln_option_info {
  uint32_t struct_size;
  const char* name;          /**< [a-z0-9_]+ */
  int32_t type;              /**< a kiln_option_type_t */
  const char* default_value; /**< parses as `type` */
  const char* doc;           /**< one line */
} kiln_option_info_t;

/**
 * The answer of instance_get_capability, filled by the plugin. Every array is
 * allocated with kiln_host_api_t.alloc and freed by the host (also when the
 * call fails). A node of the view appears in at most one group; every node
 * the plugin does not put in a group should be listed in `declined` with a
 * reason.
 */
typedef struct kiln_capability {
  uint32_t struct_size;
  size_t num_groups;        /**< groups the plugin claims */
  size_t* group_sizes;      /**< num_groups entries, each >= 1 */
  size_t* group_nodes;      /**< sum(group_sizes) node indices, group after group */
  size_t num_declined;      /**< nodes the plugin declines */
  size_t* declined_nodes;   /**< num_declined node indices */
  char** declined_reasons;  /**< num_declined NUL-terminated strings, each host-allocated */
} kiln_capability_t;

/**
 * A claimed group the host asks the plugin to compile (instance_compile).
 * The host decides the boundary: `inputs` are the non-constant values the
 * group reads from outside (constants are read from the graph view during
 * the call and must be copied if kept), `outputs` the values it produces that
 * are read outside or are graph outputs. compiled_execute receives inputs and
 * allocates outputs in exactly these orders.
 */
typedef struct kiln_partition {
  uint32_t struct_size;
  const char* id;                      /**< stable id: a hash of the group's ops and names */
  size_t num_nodes;
  const size_t* nodes;                 /**< node indices of the view, topological order */
  size_t num_inputs;
  const kiln_value_t* const* inputs;   /**< execute input order */
  size_t num_outputs;
  const kiln_value_t* const* outputs;  /**< execute output order */
} kiln_partition_t;

/** Facts about a compiled handle (compiled_get_info). */
typedef struct kiln_compiled_info {
  uint32_t struct_size;
  int32_t concurrency; /**< a kiln_concurrency_t */
  size_t num_inputs;   /**< inputs compiled_execute expects */
  size_t num_outputs;  /**< outputs it allocates */

  /* \since 1.1; every member's zero (NULL) is the 1.0 behaviour. */
  /** kiln_compiled_flag_t bits. */
  uint32_t flags;
  /**
   * Per input (num_inputs entries), the kiln_memory_kind_t the handle wants
   * it in; NULL: all host. The host delivers each input in that kind: when
   * the producer is a partition of the same instance it passes the device
   * buffer through untouched, otherwise it stages it with instance_copy
   * (one copy per edge). Borrowed from the plugin until compiled_release.
   */
  const int32_t* input_memory_kinds;
  /**
   * Per output (num_outputs entries), the kind exec_allocate_output hands
   * out for it; NULL: all host. The host plans such buffers from memory it
   * obtained with instance_alloc, and copies to host memory only where a
   * portable kernel, another plugin or the caller reads the value.
   */
  const int32_t* output_memory_kinds;
  /**
   * Scratch the handle needs per call, in bytes per memory kind (indexed by
   * kiln_memory_kind_t). The host provides it from its plan for the call's
   * duration (exec_workspace), so the plugin allocates nothing per run.
   */
  uint64_t workspace_bytes[KILN_MEMORY_KIND_COUNT];
  /**
   * In-place pairs: inplace_pairs[2*i] is an input index, inplace_pairs[2*i+1]
   * an output index whose buffer may be the input's (same kind, enough bytes).
   * The host may honour a pair when the input is read by nothing after this
   * partition; exec_allocate_output then returns the input's buffer.
   */
  size_t num_inplace;
  const size_t* inplace_pairs; /**< 2 * num_inplace entries, borrowed like input_memory_kinds */
  /**
   * Constants (graph value names) the handle has copied into memory of its
   * own and will never read from the host again: when nothing else reads
   * one, the host drops its host copy (peak RSS falls). Borrowed like
   * input_memory_kinds.
   */
  size_t num_owned_constants;
  const char* const* owned_constants;
} kiln_compiled_info_t;

/** One transfer of a batched instance_copy. \since 1.1 */
typedef struct kiln_copy {
  uint32_t struct_size;
  const void* src;
  int32_t src_kind;      /**< a kiln_memory_kind_t */
  uint32_t src_device;   /**< for device kinds, which of the instance's devices */
  void* dst;
  int32_t dst_kind;      /**< a kiln_memory_kind_t */
  uint32_t dst_device;
  size_t bytes;
} kiln_copy_t;

/**
 * Where a constant comes from, for sharing and deduplication
 * (value_constant_info). \since 1.1
 */
typedef struct kiln_constant_info {
  uint32_t struct_size;
  /**
   * A hash of the constant's dtype, dims and bytes (the host's content key):
   * equal hashes mean equal contents, across sessions and models.
   */
  uint64_t content_hash[2];
  /**
   * The ONNX external-data file the bytes live in (an absolute path; NULL
   * when the constant is stored inside the model), and where in it. A plugin
   * may map the file itself instead of copying the host's bytes. Borrowed for
   * the duration of the call that gave the graph view.
   */
  const char* external_path;
  uint64_t external_offset;
  uint64_t external_length;
} kiln_constant_info_t;

/**
 * A custom op: an op of the plugin's own domain that portable kernels do not
 * have. When the plugin is selected for a session, every node with this
 * domain and op type is compiled by the plugin as a single-node partition
 * (instance_compile), before other partitioning, whatever the backend order.
 */
typedef struct kiln_custom_op_info {
  uint32_t struct_size;
  const char* domain;    /**< e.g. "com.vendor"; never "" or "ai.onnx" */
  const char* op_type;
  int32_t since_version; /**< first opset of `domain` it implements */
  const char* doc;       /**< one line */
} kiln_custom_op_info_t;

/** A range function for kiln_host_api_t.parallel_for: handle [begin, end). */
typedef void (*kiln_range_fn)(void* user_data, int64_t begin, int64_t end);

/* ------------------------------------------------------------------------ */
/* The host's table, handed to the plugin                                   */
/* ------------------------------------------------------------------------ */

/**
 * Functions the host offers. Valid from the entry call until plugin_release
 * returns. The first three members (header, status_create, status_release)
 * keep their offsets in every future major version, so an entry function can
 * always report a version mismatch.
 */
typedef struct kiln_host_api {
  kiln_abi_header_t header;

  /* --- statuses ----------------------------------------------------------- */
  /**
   * A new error status with a kiln_status_code_t `code` (message may be
   * NULL). Never returns NULL. KILN_STATUS_OK, or a code this host does not
   * know, makes a KILN_STATUS_INTERNAL status whose message names the code.
   */
  kiln_status_t* (*status_create)(int32_t code, const char* message);
  /** Frees a status the plugin owns (one it created and did not return). Accepts NULL. */
  void (*status_release)(kiln_status_t* status);
  /** The code of a status (KILN_STATUS_OK for NULL). */
  kiln_status_code_t (*status_code)(const kiln_status_t* status);
  /** The message of a status ("" for NULL); valid while the status lives. */
  const char* (*status_message)(const kiln_status_t* status);

  /* --- memory ------------------------------------------------------------- */
  /**
   * Allocates `size` bytes aligned to `alignment` (a power of two <= 4096; 0
   * means 64). Returns NULL when size is 0, alignment is invalid or memory is
   * exhausted. Every array the plugin returns must come from here.
   */
  void* (*alloc)(kiln_host_t* host, size_t size, size_t alignment);
  /** Frees memory from alloc. Accepts NULL. */
  void (*free)(kiln_host_t* host, void* ptr);

  /* --- logging ------------------------------------------------------------ */
  /**
   * Logs one line at a kiln_log_level_t `level` (no trailing newline needed);
   * the host prefixes the plugin's name. An unknown level logs as an error.
   */
  void (*log)(kiln_host_t* host, int32_t level, const char* message);
  /** True when `level` would be printed (to skip formatting otherwise). */
  bool (*log_enabled)(kiln_host_t* host, int32_t level);

  /* --- threads ------------------------------------------------------------ */
  /** Threads of the host's pool available to this call, counting the caller (>= 1). ctx may be NULL (1). */
  int32_t (*exec_num_threads)(kiln_exec_context_t* ctx);
  /**
   * Calls fn(user_data, begin, end) over disjoint chunks covering [0, n), on
   * the host's thread pool, so backends do not oversubscribe cores. A chunk
   * holds at least `grain` items. Returns when all chunks are done. With a
   * NULL ctx (outside execute) it runs inline. fn must not throw.
   */
  void (*parallel_for)(kiln_exec_context_t* ctx, int64_t n, int64_t grain, kiln_range_fn fn, void* user_data);

  /* --- execution ---------------------------------------------------------- */
  /**
   * Allocates output `index` of the running partition (the session's memory
   * plan) and fills `out_tensor` with a view of it, valid until
   * compiled_execute returns (for compiled_execute_async: until the call's
   * fence is signalled). The memory is host memory unless the handle
   * declared another kind for that output (\since 1.1; the view's
   * memory_kind says which). dims must be >= 0; rank <= 64. Calling it
   * again for the same index replaces the earlier allocation. `dtype` is a
   * kiln_dtype_t passed as int32_t, like kiln_tensor_t.dtype, so that the
   * host can reject a value outside the enum without undefined behaviour.
   */
  kiln_status_t* (*exec_allocate_output)(kiln_exec_context_t* ctx, size_t index, int32_t dtype,
                                         const int64_t* dims, size_t rank, kiln_tensor_t* out_tensor);

  /* --- graph view: graph ---------------------------------------------------- */
  /** The graph's name ("" if none). */
  const char* (*graph_name)(const kiln_graph_t* graph);
  /** Nodes the view offers, in topological order. */
  size_t (*graph_num_nodes)(const kiln_graph_t* graph);
  /** Node `index` (NULL when out of range). */
  const kiln_node_t* (*graph_node)(const kiln_graph_t* graph, size_t index);
  /** Model inputs (never constants). */
  size_t (*graph_num_inputs)(const kiln_graph_t* graph);
  const kiln_value_t* (*graph_input)(const kiln_graph_t* graph, size_t index);
  /** Model outputs. */
  size_t (*graph_num_outputs)(const kiln_graph_t* graph);
  const kiln_value_t* (*graph_output)(const kiln_graph_t* graph, size_t index);
  /** A value by name, or NULL. */
  const kiln_value_t* (*graph_find_value)(const kiln_graph_t* graph, const char* name);
  /** The model's opset import for `domain` ("" or "ai.onnx" for ONNX); 0 when not imported. */
  int64_t (*graph_opset)(const kiln_graph_t* graph, const char* domain);

  /* --- graph view: nodes ---------------------------------------------------- */
  const char* (*node_name)(const kiln_node_t* node);     /**< may be "" */
  const char* (*node_op_type)(const kiln_node_t* node);
  const char* (*node_domain)(const kiln_node_t* node);   /**< "" for ONNX */
  int64_t (*node_opset)(const kiln_node_t* node);        /**< the model's opset for its domain */
  size_t (*node_index)(const kiln_node_t* node);         /**< its index in the view */
  size_t (*node_num_inputs)(const kiln_node_t* node);
  /** Input `index`, or NULL when it is an omitted optional input (or out of range). */
  const kiln_value_t* (*node_input)(const kiln_node_t* node, size_t index);
  size_t (*node_num_outputs)(const kiln_node_t* node);
  /** Output `index`, or NULL when the model omits it (or out of range). */
  const kiln_value_t* (*node_output)(const kiln_node_t* node, size_t index);
  size_t (*node_num_attributes)(const kiln_node_t* node);
  const kiln_attribute_t* (*node_attribute)(const kiln_node_t* node, size_t index);
  /** An attribute by name, or NULL. */
  const kiln_attribute_t* (*node_find_attribute)(const kiln_node_t* node, const char* name);

  /* --- graph view: values --------------------------------------------------- */
  const char* (*value_name)(const kiln_value_t* value);
  kiln_value_kind_t (*value_kind)(const kiln_value_t* value);
  /** Element dtype (KILN_DTYPE_UNDEFINED when unknown). */
  kiln_dtype_t (*value_dtype)(const kiln_value_t* value);
  /** Rank, or -1 when unknown. */
  int64_t (*value_rank)(const kiln_value_t* value);
  /**
   * Dimension `index`: its size, or -1 when unknown or symbolic; when
   * out_symbol is not NULL it receives the symbol's name ("" when none).
   */
  int64_t (*value_dim)(const kiln_value_t* value, size_t index, const char** out_symbol);
  /** True for initializers and values the host folded at load. */
  bool (*value_is_constant)(const kiln_value_t* value);
  /**
   * A zero-copy view of a constant's data, valid for the duration of the
   * call. Fails for values that are not constant and for string tensors.
   */
  kiln_status_t* (*value_constant)(const kiln_value_t* value, kiln_tensor_t* out_tensor);
  /** True when the value is a model input. */
  bool (*value_is_graph_input)(const kiln_value_t* value);
  /** True when the value is a model output. */
  bool (*value_is_graph_output)(const kiln_value_t* value);
  /** The node of this view that produces it, or NULL (inputs, constants, nodes outside the view). */
  const kiln_node_t* (*value_producer)(const kiln_value_t* value);
  /** Nodes of this view that read it. */
  size_t (*value_num_consumers)(const kiln_value_t* value);
  const kiln_node_t* (*value_consumer)(const kiln_value_t* value, size_t index);
  /** True when nodes outside this view (or subgraphs) also read it. */
  bool (*value_has_outside_consumers)(const kiln_value_t* value);

  /* --- graph view: attributes ----------------------------------------------- */
  const char* (*attribute_name)(const kiln_attribute_t* attr);
  kiln_attr_type_t (*attribute_type)(const kiln_attribute_t* attr);
  /** Number of elements of a list attribute (1 for a single-valued one). */
  size_t (*attribute_count)(const kiln_attribute_t* attr);
  /** INT value (0 for other types). */
  int64_t (*attribute_int)(const kiln_attribute_t* attr);
  /** FLOAT value (0 for other types). */
  float (*attribute_float)(const kiln_attribute_t* attr);
  /** INTS (NULL for other types); out_count receives the length. */
  const int64_t* (*attribute_ints)(const kiln_attribute_t* attr, size_t* out_count);
  /** FLOATS (NULL for other types); out_count receives the length. */
  const float* (*attribute_floats)(const kiln_attribute_t* attr, size_t* out_count);
  /**
   * Element `index` of STRING (index 0) or STRINGS as bytes (NOT necessarily
   * NUL-free; out_size receives the length). NULL when out of range.
   */
  const char* (*attribute_string)(const kiln_attribute_t* attr, size_t index, size_t* out_size);
  /**
   * Element `index` of TENSOR (index 0) or TENSORS, as a zero-copy view.
   * Sparse attributes: the host densifies SPARSE_TENSOR and SPARSE_TENSORS
   * attributes when it loads a model, so a plugin sees them as TENSOR and
   * TENSORS (attribute_type never returns KILN_ATTR_SPARSE_*) whose views
   * are the dense tensors (zeros where the sparse one stores no value).
   */
  kiln_status_t* (*attribute_tensor)(const kiln_attribute_t* attr, size_t index, kiln_tensor_t* out_tensor);
  /** Element `index` of GRAPH (index 0) or GRAPHS, as a view of the whole subgraph; NULL if none. */
  const kiln_graph_t* (*attribute_graph)(const kiln_attribute_t* attr, size_t index);
  /**
   * Element `index` of TYPE_PROTO (index 0) or TYPE_PROTOS, as a value with
   * no name, producer or consumers whose kind/dtype/rank/dims describe it.
   */
  const kiln_value_t* (*attribute_type_proto)(const kiln_attribute_t* attr, size_t index);

  /* --- run control (\since 1.1) -------------------------------------------- */
  /**
   * True when the caller cancelled the running Session::run or its deadline
   * passed: stop, release what you allocated and return a status with
   * KILN_STATUS_CANCELLED (the host reports its own reason, cancel or
   * deadline, whatever code you return then). Cheap (an atomic load, a clock
   * read only with a deadline): poll it between units of work of a long
   * partition. False for a NULL ctx. Check KILN_ABI_HAS first: a 1.0 host
   * has no such entry (the SDK's ExecContext::should_cancel does).
   */
  bool (*exec_should_cancel)(kiln_exec_context_t* ctx);

  /* --- fences (\since 1.1) ------------------------------------------------ */
  /**
   * Completes `fence` up to `value` (values below the fence's current one
   * are ignored) and wakes its waiters. Callable from any thread, also after
   * the call that received the fence has returned. With a non-NULL `error`
   * (whose ownership passes to the host) the work failed: waiters of this
   * value and above get that status. Signal one fence's values in the order
   * the host handed them out: reaching a value tells the host that the work
   * of every lower value is done too, so it may release that work's exec
   * context, views and inputs. Every fence a plugin was handed must be
   * signalled exactly once for its value, error or not; once fence_signal
   * returns, the plugin must not touch that fence again (its last waiter may
   * already have destroyed it).
   */
  void (*fence_signal)(kiln_fence_t* fence, uint64_t value, kiln_status_t* error);
  /**
   * Blocks until `fence` reaches `value` or `timeout_ns` passes (UINT64_MAX:
   * no limit). NULL when reached; the work's error when it failed;
   * KILN_STATUS_DEADLINE_EXCEEDED on timeout.
   */
  kiln_status_t* (*fence_wait)(kiln_fence_t* fence, uint64_t value, uint64_t timeout_ns);
  /** The highest value `fence` has reached (0 for a new fence or NULL). */
  uint64_t (*fence_value)(const kiln_fence_t* fence);

  /* --- workspace (\since 1.1) --------------------------------------------- */
  /**
   * The scratch the handle declared for memory kind `memory_kind`
   * (kiln_compiled_info_t.workspace_bytes), valid until the call's fence is
   * signalled (synchronous calls: until they return). Sets *out_size to its
   * size. NULL when nothing was declared for that kind.
   */
  void* (*exec_workspace)(kiln_exec_context_t* ctx, int32_t memory_kind, size_t* out_size);

  /* --- tracing (\since 1.1) ----------------------------------------------- */
  /**
   * True when the run is being traced (`kiln bench --trace`, a profiled
   * run): only then are the calls below worth making. False for NULL.
   */
  bool (*exec_trace_enabled)(kiln_exec_context_t* ctx);
  /**
   * Records a slice `name` (copied) on the plugin's track `track` (a small
   * number the plugin chooses: 0 compute, 1 copies, ...; each shows as its
   * own row, "plugin name / track") from `begin_ns` to `end_ns`, both on the
   * host's clock (CLOCK_MONOTONIC nanoseconds; convert device timestamps).
   * Callable from any thread until the call's fence is signalled.
   */
  void (*exec_trace_event)(kiln_exec_context_t* ctx, const char* name, int32_t track, uint64_t begin_ns,
                           uint64_t end_ns);
  /** The host's clock for exec_trace_event: CLOCK_MONOTONIC in nanoseconds. */
  uint64_t (*trace_now_ns)(void);

  /* --- shared weights (\since 1.1) ---------------------------------------- */
  /**
   * Fills `out_info` for a constant value of a graph view (see
   * kiln_constant_info_t). INVALID_ARGUMENT for a value that is not constant.
   */
  kiln_status_t* (*value_constant_info)(const kiln_value_t* value, kiln_constant_info_t* out_info);
} kiln_host_api_t;

/* ------------------------------------------------------------------------ */
/* The plugin's table, returned by the entry                                */
/* ------------------------------------------------------------------------ */

/**
 * Functions a plugin offers. Entries marked "required" must not be NULL; the
 * host refuses a plugin without them. Optional ones may be NULL (or lie past
 * the plugin's struct_size); the host then uses the stated default.
 */
typedef struct kiln_backend_api {
  kiln_abi_header_t header;

  /* --- plugin --------------------------------------------------------------- */
  /** Required. Frees the plugin object; the host calls it after releasing every instance. Accepts NULL. */
  void (*plugin_release)(kiln_plugin_t* plugin);
  /** Required. Fills `out_info`; its strings stay valid until plugin_release. */
  kiln_status_t* (*plugin_get_info)(kiln_plugin_t* plugin, kiln_plugin_info_t* out_info);
  /**
   * Optional (NULL: always available). NULL when the plugin can run here;
   * otherwise a status (KILN_STATUS_UNAVAILABLE) whose message says why and
   * what to install. Must not initialize a device more than needed to know.
   */
  kiln_status_t* (*plugin_is_available)(kiln_plugin_t* plugin);
  /** Optional (NULL: one CPU device named "default"). */
  kiln_status_t* (*plugin_get_device_count)(kiln_plugin_t* plugin, size_t* out_count);
  /** Optional with plugin_get_device_count. */
  kiln_status_t* (*plugin_get_device_info)(kiln_plugin_t* plugin, size_t index, kiln_device_info_t* out_info);
  /** Optional (NULL: the plugin takes no options). */
  kiln_status_t* (*plugin_get_option_count)(kiln_plugin_t* plugin, size_t* out_count);
  /** Optional with plugin_get_option_count. */
  kiln_status_t* (*plugin_get_option_info)(kiln_plugin_t* plugin, size_t index, kiln_option_info_t* out_info);

  /* --- instance ------------------------------------------------------------- */
  /**
   * Required. Creates an instance on device `device_index` from string
   * options (keys[i] = values[i]). Keys not in the schema must be rejected
   * with KILN_STATUS_INVALID_ARGUMENT, naming the key and listing the known
   * ones; values that do not parse as their type likewise. Omitted keys take
   * their defaults.
   */
  kiln_status_t* (*instance_create)(kiln_plugin_t* plugin, size_t device_index, const char* const* keys,
                                    const char* const* values, size_t num_options, kiln_instance_t** out_instance);
  /** Required. Frees an instance; the host calls it after releasing its compiled handles. Accepts NULL. */
  void (*instance_release)(kiln_instance_t* instance);
  /** Optional. Sets an option of the schema after creation; unknown keys and bad values are errors. */
  kiln_status_t* (*instance_set_property)(kiln_instance_t* instance, const char* key, const char* value);
  /** Optional. Reads an option (or a read-only property); *out_value is host-allocated. */
  kiln_status_t* (*instance_get_property)(kiln_instance_t* instance, const char* key, char** out_value);
  /**
   * Required. Looks at the view's nodes (those no earlier backend claimed)
   * and says which it runs: groups to fuse and, per declined node, why.
   */
  kiln_status_t* (*instance_get_capability)(kiln_instance_t* instance, const kiln_graph_t* graph,
                                            kiln_capability_t* out_capability);
  /**
   * Required. Compiles a group (as claimed, or a convex part of it) into a
   * handle. Must fail (not crash) for a group it would not claim.
   */
  kiln_status_t* (*instance_compile)(kiln_instance_t* instance, const kiln_graph_t* graph,
                                     const kiln_partition_t* partition, kiln_compiled_t** out_compiled);

  /* --- compiled ------------------------------------------------------------- */
  /** Required. Frees a compiled handle. Accepts NULL. */
  void (*compiled_release)(kiln_compiled_t* compiled);
  /** Optional (NULL: serial, counts unchecked). */
  kiln_status_t* (*compiled_get_info)(kiln_compiled_t* compiled, kiln_compiled_info_t* out_info);
  /**
   * Required. Runs the partition: reads `inputs` (partition input order) and
   * obtains every output through kiln_host_api_t.exec_allocate_output. Wrong
   * input counts, dtypes or shapes are errors, never crashes.
   */
  kiln_status_t* (*compiled_execute)(kiln_compiled_t* compiled, kiln_exec_context_t* ctx,
                                     const kiln_tensor_t* const* inputs, size_t num_inputs);
  /** Optional (NULL: no export). Serializes a handle; *out_bytes is host-allocated. */
  kiln_status_t* (*compiled_export)(kiln_compiled_t* compiled, void** out_bytes, size_t* out_size);
  /**
   * Optional with compiled_export. NULL when `bytes` can be imported by this
   * plugin build on this machine; otherwise why not. Must not initialize a
   * device.
   */
  kiln_status_t* (*plugin_check_compiled)(kiln_plugin_t* plugin, const void* bytes, size_t size);
  /** Optional with compiled_export. Rebuilds a handle from exported bytes. */
  kiln_status_t* (*instance_import)(kiln_instance_t* instance, const void* bytes, size_t size,
                                    kiln_compiled_t** out_compiled);

  /* --- custom ops ----------------------------------------------------------- */
  /** Optional (NULL: none). Ops of the plugin's own domain (see kiln_custom_op_info_t). */
  kiln_status_t* (*plugin_get_custom_op_count)(kiln_plugin_t* plugin, size_t* out_count);
  /** Optional with plugin_get_custom_op_count. */
  kiln_status_t* (*plugin_get_custom_op_info)(kiln_plugin_t* plugin, size_t index, kiln_custom_op_info_t* out_info);

  /* --- memory (\since 1.1; optional: NULL means host memory only) ---------- */
  /**
   * Allocates `size` bytes of kind `memory_kind` (a kiln_memory_kind_t other
   * than HOST) on the instance's device `device_index`, aligned to
   * `alignment` (a power of two; 0 means 64). RESOURCE_EXHAUSTED when the
   * device is out of memory. The host keeps such buffers for the session's
   * life (its memory plan), not per run.
   */
  kiln_status_t* (*instance_alloc)(kiln_instance_t* instance, int32_t memory_kind, uint32_t device_index,
                                   size_t size, size_t alignment, void** out_ptr);
  /** Frees memory from instance_alloc. Accepts NULL. */
  void (*instance_free)(kiln_instance_t* instance, int32_t memory_kind, void* ptr);
  /**
   * Performs `num_copies` transfers between host, pinned and device memory of
   * this instance. With a NULL `fence` it returns when they are done; with a
   * fence it may return at once and signals `fence` to `value` when all are
   * done (a non-NULL return means nothing was queued and the plugin will not
   * signal the fence) (copies queued on one instance run in order with its executions).
   * The `copies` array is borrowed for the call only: copy what you queue.
   */
  kiln_status_t* (*instance_copy)(kiln_instance_t* instance, const kiln_copy_t* copies, size_t num_copies,
                                  kiln_fence_t* fence, uint64_t value);
  /**
   * Makes work queued on the instance after this call wait until `fence`
   * reaches `value` (another instance's or the host's fence), without
   * blocking the caller. Optional with instance_copy: when NULL, the host
   * waits on the fence itself before queueing more work.
   */
  kiln_status_t* (*instance_stream_wait)(kiln_instance_t* instance, kiln_fence_t* fence, uint64_t value);

  /* --- asynchronous execution (\since 1.1; for KILN_COMPILED_ASYNC) -------- */
  /**
   * Like compiled_execute, but may return before the work is done: it must
   * obtain every output (exec_allocate_output) before returning, and signals
   * `fence` to `value` (with an error status when the work fails) once the
   * outputs are written. `ctx` and the input tensors' memory stay valid until
   * then (so the work may poll exec_should_cancel, use exec_workspace and
   * record trace events); the tensor view structs themselves only during the
   * call. parallel_for runs inline for such a context (the host's pool does
   * not wait for the plugin's worker): an async plugin brings its own threads. A non-NULL return means nothing was queued and the fence will not
   * be signalled by the plugin. Work queued on one instance runs in order.
   */
  kiln_status_t* (*compiled_execute_async)(kiln_compiled_t* compiled, kiln_exec_context_t* ctx,
                                           const kiln_tensor_t* const* inputs, size_t num_inputs,
                                           kiln_fence_t* fence, uint64_t value);
} kiln_backend_api_t;

/* ------------------------------------------------------------------------ */
/* The entry                                                                */
/* ------------------------------------------------------------------------ */

/** What the host passes to the entry. */
typedef struct kiln_backend_entry_args {
  uint32_t struct_size;
  uint16_t min_abi_major; /**< oldest ABI version the host speaks */
  uint16_t min_abi_minor;
  uint16_t max_abi_major; /**< newest ABI version the host speaks */
  uint16_t max_abi_minor;
  const kiln_host_api_t* host_api; /**< valid until plugin_release returns */
  kiln_host_t* host;               /**< passed back to alloc/free/log */
} kiln_backend_entry_args_t;

/**
 * The entry (exported as KILN_BACKEND_ENTRY_SYMBOL). Returns NULL and sets
 * *out_api (valid until plugin_release) and *out_plugin, or an error status
 * (made with args->host_api->status_create): for an ABI range it cannot
 * speak, a vendor library it cannot do without, or any other init failure.
 * The host may call it more than once per loaded library (each call makes an
 * independent plugin object).
 */
typedef kiln_status_t* (*kiln_backend_entry_fn)(const kiln_backend_entry_args_t* args,
                                                const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin);

/** True when member `member` of table/struct `type` lies within `size` bytes (for version checks). */
#define KILN_ABI_HAS(type, member, size) \
  (offsetof(type, member) + sizeof(((type*)0)->member) <= (size_t)(size))

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* KILN_C_BACKEND_H_ */
