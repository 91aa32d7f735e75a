/*
 * config_internal.h -- what the configuration parser's files share.
 *
 * config.c reads mop's own configuration keys and settles the defaults,
 * config_layers.c the model and its layers, keras.c what Keras'
 * model.to_json() form adds, and config_json.c the typed JSON accessors
 * they all use.  Every accessor raises the standard configuration error
 * (SQLSTATE 22023) naming the field with its path.  Not for use outside
 * these files.
 */
#ifndef MOP_CONFIG_INTERNAL_H
#define MOP_CONFIG_INTERNAL_H

#include "utils/jsonb.h"

#include "mop.h"

/* One key/value of a JSON object. */
typedef struct JsonItem
{
	char	   *key;
	JsonbValue	val;
} JsonItem;

/* config_json.c */
extern void cfg_error(const char *field, const char *fmt,...)
			pg_attribute_printf(2, 3) pg_attribute_noreturn();
extern JsonItem *cfg_object_items(JsonbContainer *c, const char *path, int *n);
extern JsonbValue *cfg_array_elems(const JsonbValue *v, const char *path, int *n);
extern double cfg_number(const JsonbValue *v, const char *field);
extern int64 cfg_int(const JsonbValue *v, const char *field, int64 lo, int64 hi);
extern char *cfg_string(const JsonbValue *v, const char *field);
extern bool cfg_bool(const JsonbValue *v, const char *field);
extern char *cfg_squash(const char *s);
extern int32 cfg_activation(const JsonbValue *v, const char *field);
extern void cfg_pair(const JsonbValue *v, const char *field, int32 *h, int32 *w);

/* config_layers.c */
extern const char *cfg_layers_path;
extern void cfg_parse_model(JsonbValue *mv, nn_spec *spec);

/*
 * What Keras' serialised form says beyond mop's own keys, gathered while the
 * layers are parsed and settled once all are known (keras_settle): the
 * initializer and L2 factor of every layer with a kernel, the input shape.
 * Reset by mop_config_to_spec() for every configuration it parses.
 */
typedef struct KerasInfo
{
	bool		keras;			/* some layer or the model came in Keras' form */
	int			init[NN_MAX_LAYERS];	/* per layer: -1 none given, else nn_init */
	double		l2[NN_MAX_LAYERS];	/* per layer: Keras L2 factor (0: none) */
	bool		flat;			/* the shape reaching the next layer is a vector */
	int32		in_h,
				in_w,
				in_c;			/* the dataset's input shape */
	int			cur;			/* index of the layer being parsed */
	int			src[NN_MAX_LAYERS];	/* per layer: its index in the JSON list */
} KerasInfo;

/* keras.c */
extern KerasInfo keras_info;
extern bool keras_layer_config(JsonItem **items, int *n, const char **path,
							   char **type, const char **tkey);
extern void keras_input_layer(JsonItem *items, int n, const char *path);
extern bool keras_layer_key(const char *k, const JsonbValue *v, const char *field,
							nn_layer_spec *l);
extern JsonbValue *keras_sequential(JsonItem *items, int ni, const char **lpath);
extern void keras_settle(nn_spec *spec, bool have_init, bool have_l2);

#endif							/* MOP_CONFIG_INTERNAL_H */
