/* client.c — libkvclient (being written). */
#include "kvclient.h"

const char *kvc_code_name(int code)
{
	(void)code;
	return "UNKNOWN";
}
