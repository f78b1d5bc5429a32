// ESLint flat config: typescript-eslint's recommended rules over src/, test/, bench/ and scripts/.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'build/**', 'assembly/**', 'dist/**', 'docs/api/**', 'src/web/vendor/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        console: 'readonly',
        process: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setImmediate: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        performance: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
        WebAssembly: 'readonly',
        SharedArrayBuffer: 'readonly',
        Atomics: 'readonly',
        globalThis: 'readonly',
        queueMicrotask: 'readonly',
        fetch: 'readonly',
        Buffer: 'readonly',
        AbortController: 'readonly',
        structuredClone: 'readonly',
        self: 'readonly',
        window: 'readonly',
        document: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
