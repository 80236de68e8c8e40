#ifndef GLM_VERSION_H
#define GLM_VERSION_H
#define GLMCHAT_VERSION "0.1.0"
#endif
