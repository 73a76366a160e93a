"""Readers for model files (.tflite, NCNN .param/.bin, .onnx). They import no runtime."""
